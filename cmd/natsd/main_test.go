package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
)

// setup makes the callout's keys and a trusted authority of cluster
// fleet, and the server options rendered with callout (nil: none).
func setup(t *testing.T, withCallout bool) (env map[string]string, opts *server.Options, fleet nkeys.KeyPair) {
	t.Helper()
	keysDir, authDir := t.TempDir(), t.TempDir()
	keys, _, err := natsauth.EnsureKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	fleet, _ = nkeys.CreateAccount()
	public, _ := fleet.PublicKey()
	if err := os.WriteFile(filepath.Join(authDir, "fleet.authority"), []byte(public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var callout *natsconf.Callout
	if withCallout {
		callout = &natsconf.Callout{Issuer: keys.Issuer, User: keys.User}
	}
	opts, err = natsconf.OptionsWith(t.TempDir(), "127.0.0.1", -1, "", natsconf.LocalPasswords, nil, callout)
	if err != nil {
		t.Fatal(err)
	}
	env = map[string]string{
		envIssuer:      filepath.Join(keysDir, natsauth.IssuerSeedFile),
		envUser:        filepath.Join(keysDir, natsauth.UserSeedFile),
		envAuthorities: authDir,
	}
	return env, opts, fleet
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestConfigureRefuses(t *testing.T) {
	env, opts, _ := setup(t, true)
	if c, err := configure(opts, getenv(nil)); c != nil || err != nil {
		t.Errorf("no variables: %v, %v; want no check and no error", c, err)
	}
	_, plain, _ := setup(t, false)
	otherKeys := t.TempDir()
	if _, _, err := natsauth.EnsureKeys(otherKeys); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]string)
		opts *server.Options
		want string
	}{
		{"one variable missing", func(e map[string]string) { delete(e, envUser) }, opts, "all three"},
		{"no auth_callout block", nil, plain, "no auth_callout block"},
		{"another issuer", func(e map[string]string) { e[envIssuer] = filepath.Join(otherKeys, natsauth.IssuerSeedFile) }, opts, "auth_callout.issuer is"},
		{"another user", func(e map[string]string) { e[envUser] = filepath.Join(otherKeys, natsauth.UserSeedFile) }, opts, "auth_users does not list"},
		{"no such account", func(e map[string]string) { e[envAccount] = "NOPE" }, opts, "no account \"NOPE\""},
		{"no authorities", func(e map[string]string) { e[envAuthorities] = t.TempDir() }, opts, "holds no"},
	} {
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		if c.edit != nil {
			c.edit(e)
		}
		if _, err := configure(c.opts, getenv(e)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.name, err, c.want)
		}
	}
}

// The server runs the check: a member with its credential connects.
func TestCheckRuns(t *testing.T) {
	env, opts, fleet := setup(t, true)
	c, err := configure(opts, getenv(env))
	if err != nil || c == nil {
		t.Fatalf("configure: %v, %v", c, err)
	}
	s, err := natsconf.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- c.run(s) }()
	defer func() {
		natsconf.Stop(s)
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	user, _ := nkeys.CreateUser()
	public, _ := user.PublicKey()
	token, err := membercreds.Issue(fleet, "fleet", 9, public, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	connect := func() error {
		nc, err := nats.Connect(s.ClientURL(), append(membercreds.NATSOptions(token, user), nats.Name(protocol.ConnectionName("fleet", 9)))...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	// run subscribes in its own goroutine: wait for it.
	batontest.CheckFor(t, 5*time.Second, connect)
	// The check's connection closed while the server runs (here: kicked
	// by the server, as a slow consumer would be): it connects again.
	var cid uint64
	for _, c := range connz(t, s) {
		if c.Name == "baton-auth" {
			cid = c.Cid
		}
	}
	if cid == 0 {
		t.Fatal("no connection of the check")
	}
	if err := s.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	batontest.CheckFor(t, 10*time.Second, func() error {
		for _, c := range connz(t, s) {
			if c.Name == "baton-auth" && c.Cid != cid {
				return connect()
			}
		}
		return errors.New("the check has not connected again")
	})
}

func connz(t *testing.T, s *server.Server) []*server.ConnInfo {
	t.Helper()
	z, err := s.Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return z.Conns
}
