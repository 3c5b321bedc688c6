package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
