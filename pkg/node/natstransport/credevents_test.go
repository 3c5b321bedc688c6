package natstransport_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// credCluster is a cluster with dynamic membership whose members connect
// with their credentials to a server that checks them (internal/natsauth),
// configured as the deployment.
type credCluster struct {
	url       string
	name      string
	authority nkeys.KeyPair
	creds     map[uint64]credential
}

type credential struct {
	token string
	kp    nkeys.KeyPair
}

func newCredCluster(t *testing.T, name string, ids ...uint64) *credCluster {
	t.Helper()
	c := &credCluster{name: name, creds: map[uint64]credential{}}
	c.authority, _ = nkeys.CreateAccount()
	authorityPublic, _ := c.authority.PublicKey()
	authDir, keysDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(authDir, name+natsauth.AuthoritySuffix), []byte(authorityPublic+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, stop, err := natsconf.StartLocalWithCallout(t.TempDir(), "127.0.0.1", -1, "", nil, keysDir, authDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c.url = s.ClientURL()
	for _, id := range ids {
		kp, _ := nkeys.CreateUser()
		public, _ := kp.PublicKey()
		token, err := membercreds.Issue(c.authority, name, id, public, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c.creds[id] = credential{token: token, kp: kp}
	}
	return c
}

// start runs member id, connected with its credential.
func (c *credCluster) start(t *testing.T, id uint64) *running {
	t.Helper()
	cred := c.creds[id]
	opts := membercreds.NATSOptions(cred.token, cred.kp)
	nc := connect(t, c.url, append(opts, nats.Name(protocol.ConnectionName(c.name, id)))...)
	signer, err := signing.NewSigner(id, cred.kp)
	if err == nil {
		signer, err = signer.WithCredential(cred.token)
	}
	if err != nil {
		t.Fatal(err)
	}
	authority, _ := c.authority.PublicKey()
	checker, err := membercreds.NewChecker(c.name, authority)
	if err != nil {
		t.Fatal(err)
	}
	timing := slowTiming()
	timing.PresenceTicks = 50
	n, err := natsnode.New(nc, natsnode.Config{
		Node: node.Config{
			Cluster:   c.name,
			Algorithm: protocol.Bully,
			Election:  election.Config{ID: id, Members: []uint64{id}, Dynamic: true, Timing: timing},
			DataDir:   t.TempDir(),
			Logger:    testLogger().With("node", id, "cluster", c.name),
		},
		Signer: signer,
		Keys:   checker.Keys(),
		Probe: func(_ context.Context, name string) error {
			nc, err := nats.Connect(c.url, append(opts[:len(opts):len(opts)], nats.Name(name))...)
			if err != nil {
				return err
			}
			nc.Close()
			return nil
		},
	})
	return run(t, n, nc, err)
}

// TestCredentialMemberDisconnect: members with credentials, on a server
// that checks them, learn from its connection event that the leader's
// connection closed, not from its silence; and a client that takes the
// leader's connection name, as the node user or as another member with
// its own credential, proves nothing.
func TestCredentialMemberDisconnect(t *testing.T) {
	c := newCredCluster(t, "dyn", 1, 2, 3)
	nodes := map[uint64]*running{}
	for _, id := range []uint64{1, 2, 3} {
		nodes[id] = c.start(t, id)
	}
	term := awaitAgreement(t, nodes, 3)

	leaderName := nats.Name(protocol.ConnectionName(c.name, 3))
	member2 := membercreds.NATSOptions(c.creds[2].token, c.creds[2].kp)
	for _, opts := range [][]nats.Option{
		append(batontest.AsNode(c.name, 3), leaderName), // the node user's password
		append(member2, leaderName),                     // member 2's own credential
	} {
		nc, err := nats.Connect(c.url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	}
	for _, id := range []uint64{1, 2} {
		batontest.CheckFor(t, 5*time.Second, func() error {
			if got := counter(t, nodes[id].Registry(), "election_messages_dropped_total", "reason", string(protocol.ReasonSignature)); got < 4 {
				return fmt.Errorf("node %d: forged connection events dropped: got %v, want 4", id, got)
			}
			return nil
		})
	}
	if got, err := agreement(nodes, 3); err != nil || got != term {
		t.Fatalf("after the impostors: term %d, %v; want leader 3, term %d", got, err, term)
	}
	for _, id := range []uint64{1, 2} {
		if got := counter(t, nodes[id].Registry(), "election_peer_disconnects_total"); got != 0 {
			t.Errorf("node %d: election_peer_disconnects_total = %v after the impostors, want 0", id, got)
		}
	}

	nodes[3].crash(t)
	delete(nodes, 3)
	if next := awaitAgreement(t, nodes, 2); next <= term {
		t.Fatalf("term after the crash: got %d, want > %d", next, term)
	}
	for id, n := range nodes {
		if got := counter(t, n.Registry(), "election_leader_disconnects_total"); got != 1 {
			t.Errorf("node %d: election_leader_disconnects_total = %v, want 1", id, got)
		}
		if got := counter(t, n.Registry(), "election_leader_timeouts_total"); got != 0 {
			t.Errorf("node %d: election_leader_timeouts_total = %v, want 0: the event came first", id, got)
		}
	}
}
