package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/baton-election/baton/cmd/internal/localcluster"
)

// testRoster is a run of clusters with nodes 1..3 each, not started.
func testRoster(t *testing.T, clusters ...string) roster {
	t.Helper()
	r := roster{nodes: map[string][]*localcluster.Node{}}
	for _, c := range clusters {
		ns, err := localcluster.NewNodes(localcluster.Spec{
			Binary:    "/bin/sh",
			Cluster:   c,
			IDs:       []uint64{1, 2, 3},
			HTTPAddrs: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"},
			LogDir:    t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		r.clusters = append(r.clusters, c)
		r.nodes[c] = ns
	}
	return r
}

func TestRosterFind(t *testing.T) {
	one := testRoster(t, "default")
	all := testRoster(t, "bully", "ring")
	for _, c := range []struct {
		r       roster
		ref     string
		want    string // the member found, or
		wantErr string // the error
	}{
		{one, "3", "default/3", ""},
		{one, "default/1", "default/1", ""},
		{all, "ring/2", "ring/2", ""},
		{one, "", "", "name one node"},
		{one, "9", "", "no node 9: the nodes are 1..3"},
		{one, "0", "", `"0" is not a node`},
		{one, "-1", "", `"-1" is not a node`},
		{one, "x", "", `"x" is not a node`},
		{one, "99999999999999999999999", "", "is not a node"},
		{one, "ring/1", "", `no cluster "ring": the clusters are default`},
		{one, "default/", "", `"default/" is not a node`},
		{all, "2", "", "node 2 of which cluster? name it as <cluster>/2, one of bully, ring"},
	} {
		m, err := c.r.find(c.ref)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("find(%q): %v, %v; want an error saying %q", c.ref, m.node, err, c.wantErr)
		case c.wantErr == "" && (err != nil || m.String() != c.want):
			t.Errorf("find(%q): %v, want %s", c.ref, err, c.want)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"": syscall.SIGTERM, "TERM": syscall.SIGTERM, "sigterm": syscall.SIGTERM, "KILL": syscall.SIGKILL, "SIGKILL": syscall.SIGKILL} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q): %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseSignal("STOP"); err == nil || !strings.Contains(err.Error(), "TERM or KILL") {
		t.Errorf("parseSignal(STOP): %v, want an error naming TERM and KILL", err)
	}
}
