package node

import (
	"errors"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/protocol"
)

// A node needs its transport, what it asks the cluster at start and its
// machine factory; a factory that cannot build the machine of cfg makes
// cfg invalid.
func TestDeps(t *testing.T) {
	cfg := Config{Cluster: "c", Algorithm: protocol.Bully, Election: electionConfig(1, []uint64{1}), DataDir: t.TempDir(), Logger: testLogger()}
	conn := endpoint(1)
	bully := machines.Factory{Algorithm: protocol.Bully}.New
	for name, deps := range map[string]Deps{
		"no transport":        {Cluster: conn, Machines: bully},
		"no cluster":          {Transport: conn, Machines: bully},
		"no machines":         {Transport: conn, Cluster: conn},
		"machines of nothing": {Transport: conn, Cluster: conn, Machines: machines.Factory{}.New},
	} {
		if _, err := New(cfg, deps); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(cfg, Deps{Transport: conn, Cluster: conn, Machines: bully}); err != nil {
		t.Errorf("every dependency: %v", err)
	}
}

// A spread rank is its election's: one computed for another name would
// rank the members otherwise than the other members of the election.
func TestRankOfAnotherElection(t *testing.T) {
	cfg := Config{Cluster: "shard-1", Algorithm: protocol.Bully, DataDir: t.TempDir(), Logger: testLogger(),
		Election: election.Config{ID: 1, Members: []uint64{1, 2}, Timing: testTiming, Rank: election.Spread("shard-2")}}
	if _, err := newTestNode(endpoint(1), endpoint(1), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("spread rank of another election: %v", err)
	}
	cfg.Election.Rank = election.Spread("shard-1")
	if _, err := newTestNode(endpoint(1), endpoint(1), cfg); err != nil {
		t.Fatalf("spread rank of its election: %v", err)
	}
}
