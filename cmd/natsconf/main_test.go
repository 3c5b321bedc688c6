package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
)

// Each cluster's members file states the cluster and its algorithm: the
// one named after the colon, or the cluster's own name when that is an
// algorithm's.
func TestClustersStateTheirAlgorithm(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"-dir", dir, "-cluster", "bully=1,2,3", "-cluster", "prod:paxos=1,2,3"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]protocol.Algorithm{"bully": protocol.Bully, "prod": protocol.Paxos} {
		keys, err := memberkeys.Read(filepath.Join(dir, name))
		if err != nil || keys.Cluster() != name || keys.Algorithm() != want {
			t.Errorf("%s: keys %v stating cluster %q, algorithm %q, %v; want %s, %s", name, keys.IDs(), keys.Cluster(), keys.Algorithm(), err, name, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "accounts.conf")); err != nil {
		t.Error(err)
	}
	// The same keys, asked for as another algorithm, are refused.
	if err := run([]string{"-dir", dir, "-cluster", "prod:byzantine=1,2,3"}); err == nil || !strings.Contains(err.Error(), `"paxos"`) {
		t.Errorf("prod as byzantine over prod's paxos keys: %v, want a refusal naming paxos", err)
	}
}

func TestClusterFlag(t *testing.T) {
	for _, v := range []string{"prod=1,2,3", "prod:raft=1,2", "bully:=1", "a.b:bully=1", "bully", "bully=1,1"} {
		if err := (clusters{}).Set(v); err == nil {
			t.Errorf("-cluster %s: no error", v)
		}
	}
	c := clusters{}
	if err := c.Set("ring=1,2"); err != nil || c["ring"].algorithm != protocol.Ring {
		t.Errorf("-cluster ring=1,2: %v, %+v; want the ring algorithm", err, c["ring"])
	}
	if err := c.Set("ring:bully=3"); err == nil {
		t.Error("-cluster ring given twice: no error")
	}
}

// A dynamic cluster gets the credential check: its keys, its authority
// where the servers read it, and the auth_callout block; its authority
// must exist first.
func TestDynamicCluster(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"-dir", dir, "-cluster", "bully=1,2,3", "-dynamic", "fleet"}); err == nil || !strings.Contains(err.Error(), "-authority new") {
		t.Fatalf("no authority yet: %v; want an error that says how to make it", err)
	}
	authority, _ := nkeys.CreateAccount()
	public, _ := authority.PublicKey()
	if err := os.MkdirAll(filepath.Join(dir, "fleet"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet", membercreds.AuthorityFile), []byte(public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-dir", dir, "-cluster", "bully=1,2,3", "-dynamic", "fleet"}); err != nil {
		t.Fatal(err)
	}
	keys, made, err := natsauth.EnsureKeys(filepath.Join(dir, "callout"))
	if err != nil || made {
		t.Fatalf("callout keys: made again %v, %v", made, err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"issuer: " + keys.Issuer, "auth_users: [ " + keys.User + " ]", "# member bully/1"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("accounts.conf has no %q", want)
		}
	}
	got, err := natsauth.LoadAuthorities(filepath.Join(dir, "callout", "authorities"))
	if err != nil || len(got) != 1 || len(got["fleet"]) != 1 || got["fleet"][0] != public {
		t.Errorf("authorities %v, %v; want fleet's", got, err)
	}
	if err := run([]string{"-dir", dir, "-cluster", "fleet:bully=1", "-dynamic", "fleet"}); err == nil {
		t.Error("a cluster both with keys and dynamic: no error")
	}
}
