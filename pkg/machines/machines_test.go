package machines_test

import (
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/protocol"
)

// Each algorithm's machine is built, the byzantine one only with member
// keys, whose signature checks it counts; an unknown algorithm is refused.
func TestFactory(t *testing.T) {
	members := []uint64{1, 2, 3}
	ecfg := election.Config{ID: 1, Members: members, Timing: election.DefaultLeaseTiming(len(members))}
	for _, alg := range protocol.CrashAlgorithms {
		m, err := machines.Factory{Algorithm: alg, Cluster: "c"}.New(ecfg, nil)
		if err != nil || m.Status().ID != 1 {
			t.Errorf("%s: %v", alg, err)
		}
	}
	if _, err := (machines.Factory{Algorithm: protocol.Byzantine, Cluster: "c"}).New(ecfg, nil); err == nil {
		t.Error("byzantine without keys: built")
	}
	signers, keys := batontest.MemberKeys(t, members...)
	if _, err := (machines.Factory{Algorithm: protocol.Byzantine, Cluster: "c", Signer: signers[1], Keys: keys}).New(ecfg, func() {}); err != nil {
		t.Errorf("byzantine: %v", err)
	}
	if _, err := (machines.Factory{Algorithm: "raft", Cluster: "c"}).New(ecfg, nil); err == nil {
		t.Error("an unknown algorithm: built")
	}
}
