// Package batontest holds the helpers that the tests of several packages
// share: an embedded NATS server (started by natsconf.Start), a connection
// to it, a service binary built for the test, and a poll with a deadline.
// Only tests import it.
//
// Every helper takes the test's testing.TB, fails the test on error, and
// registers with t.Cleanup whatever it must undo, so a test that uses it
// leaves no goroutine, process or file behind (the packages check this with
// goleak). Cleanups run last in, first out: a connection made after the
// server starts is closed before the server shuts down.
//
// The helper that starts real election nodes is in the subpackage
// clustertest, because this package must not import pkg/node: the tests of
// pkg/node and of its NATS adapter, pkg/node/natstransport, use it.
package batontest

import (
	"context"
	"os/exec"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// NATSOption configures the server that StartNATS runs.
type NATSOption func(t testing.TB, o *server.Options)

// WithJetStream enables JetStream, stored in a temporary directory of the
// test.
func WithJetStream() NATSOption {
	return func(t testing.TB, o *server.Options) {
		o.JetStream = true
		o.StoreDir = t.TempDir()
	}
}

// WithUser makes the server require user and password from every client.
func WithUser(user, password string) NATSOption {
	return func(_ testing.TB, o *server.Options) {
		o.Username, o.Password = user, password
	}
}

// WithAccounts configures the server with the deployment's accounts and
// users (internal/natsconf) and the local passwords: clients connect as
// natsconf.NodeUser and the others, and the application account receives
// its connection events. It replaces the options set before it.
func WithAccounts() NATSOption {
	return func(t testing.TB, o *server.Options) {
		conf, err := natsconf.Options(t.TempDir(), "127.0.0.1", -1, "", natsconf.LocalPasswords)
		if err != nil {
			t.Fatal(err)
		}
		conf.NoLog, conf.NoSigs = true, true
		*o = *conf
	}
}

// WithMemberUsers adds, to a server configured WithAccounts (give it
// after), one nkey user per member of keys, with the node user's account
// and permissions: a node that connects with its member key
// (AsMember) is known to the server, and to the connection events, by
// that key.
func WithMemberUsers(keys *signing.MemberKeys) NATSOption {
	return func(t testing.TB, o *server.Options) {
		var node *server.User
		for _, u := range o.Users {
			if u.Username == natsconf.NodeUser {
				node = u
			}
		}
		if node == nil {
			t.Fatal("WithMemberUsers: no node user; give WithAccounts first")
		}
		for _, id := range keys.IDs() {
			public, _ := keys.PublicKey(id)
			o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: public, Account: node.Account, Permissions: node.Permissions})
		}
	}
}

// AsNode are the connection options of a node of cluster with id, on a
// server started WithAccounts: the node user, and the connection name by
// which connection events name the member.
func AsNode(cluster string, id uint64) []nats.Option {
	return []nats.Option{
		nats.UserInfo(natsconf.NodeUser, natsconf.LocalPasswords.Node),
		nats.Name(protocol.ConnectionName(cluster, id)),
	}
}

// StartNATS runs an embedded NATS server on 127.0.0.1 and a free port,
// waits until it accepts connections and returns its client URL. The
// server logs nothing and ignores signals; it is shut down, and waited
// for, when the test ends.
func StartNATS(t testing.TB, opts ...NATSOption) string {
	t.Helper()
	return StartNATSServer(t, opts...).ClientURL()
}

// StartNATSServer is StartNATS for tests that need the server itself, to
// count its clients or subscriptions.
func StartNATSServer(t testing.TB, opts ...NATSOption) *server.Server {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	for _, opt := range opts {
		opt(t, o)
	}
	s, err := natsconf.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsconf.Stop(s) })
	return s
}

// Connect connects to the NATS server at url with opts; the connection is
// closed when the test ends.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// BuildBinary compiles the main package pkg with go build into a temporary
// directory of the test and returns the binary's path. pkg is anything go
// build accepts, resolved from the test's working directory, which is the
// directory of the package under test: "." builds that package. The
// binary is named after the package's directory.
//
// Building takes seconds, so BuildBinary skips the test under -short.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a binary; skipped with -short")
	}
	name := path.Base(filepath.ToSlash(pkg))
	if name == "." || name == ".." || name == "/" {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			t.Fatal(err)
		}
		name = filepath.Base(abs)
	}
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// LeaderStream creates a JetStream stream that keeps every cluster's
// announcements (election.*.leader), as the observer does, on the server
// nc is connected to (which must have JetStream), and returns a JetStream
// handle.
func LeaderStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsconf.ReadyTimeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LEADERS", Subjects: []string{protocol.AllLeaders}}); err != nil {
		t.Fatalf("create the leader stream: %v", err)
	}
	return js
}

// CheckFor calls f until it returns nil, failing the test with f's last
// error once timeout has passed. It is for conditions no event announces,
// such as the state of another process: it polls every 10 ms.
func CheckFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("after %v: %v", timeout, err)
		case <-poll.C:
		}
	}
}

// MemberKeys returns a new user key for each of members, as signers, and
// their public keys, as a cluster's ELECTION_KEY_FILEs and
// ELECTION_KEYS_FILE hold them.
func MemberKeys(t testing.TB, members ...uint64) (map[uint64]*signing.Signer, *signing.MemberKeys) {
	t.Helper()
	signers := make(map[uint64]*signing.Signer, len(members))
	public := make(map[uint64]string, len(members))
	for _, id := range members {
		signers[id] = NewSigner(t, id)
		public[id] = signers[id].PublicKey()
	}
	keys, err := signing.NewMemberKeys(public)
	if err != nil {
		t.Fatal(err)
	}
	return signers, keys
}

// NewSigner returns a signer for member id with a new user key: a member's
// own when listed by MemberKeys, a stranger's key that claims id when not.
func NewSigner(t testing.TB, id uint64) *signing.Signer {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, err := signing.NewSigner(id, kp)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// AsMember are the connection options of member id of cluster on a
// server that lists its public key as an nkey user: its key, and the
// connection name by which connection events name the member.
func AsMember(cluster string, s *signing.Signer) []nats.Option {
	return []nats.Option{
		nats.Nkey(s.PublicKey(), s.KeyPair().Sign),
		nats.Name(protocol.ConnectionName(cluster, s.ID())),
	}
}
