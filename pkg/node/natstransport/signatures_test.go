package natstransport_test

import (
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

// election_signature_checks_total counts every signature a node checks:
// none in an unsigned cluster; each received message's in a signed one;
// and, in a byzantine one, the votes and certificates the algorithm reads
// besides.
func TestSignatureChecksCounted(t *testing.T) {
	members := []uint64{1, 2, 3, 4}
	for _, tc := range []struct {
		algorithm protocol.Algorithm
		signed    bool
	}{{protocol.Bully, false}, {protocol.Bully, true}, {protocol.Byzantine, true}} {
		name := string(tc.algorithm)
		if tc.signed {
			name += "-signed"
		}
		t.Run(name, func(t *testing.T) {
			url := batontest.StartNATS(t)
			c := cluster{url: url, name: "sigs", algorithm: tc.algorithm, members: members}
			if tc.signed {
				c.signers, c.keys = batontest.MemberKeys(t, members...)
			}
			if tc.algorithm.NeedsKeys() {
				c.timing = byzantineTiming
			}
			nodes := c.startAll(t)
			awaitAgreement(t, nodes, 4)
			// Read the messages received first: each was checked before
			// it was counted, so before the checks are read.
			received := counters(t, nodes, "election_messages_received_total")
			checks := counters(t, nodes, "election_signature_checks_total")
			beyond := false
			for id := range nodes {
				switch {
				case !tc.signed && checks[id] != 0:
					t.Errorf("unsigned node %d: %v signature checks, want 0", id, checks[id])
				case tc.signed && checks[id] < received[id]:
					t.Errorf("node %d: %v signature checks for %v messages received, want one each at least", id, checks[id], received[id])
				}
				beyond = beyond || checks[id] > received[id]
			}
			if tc.algorithm == protocol.Byzantine && !beyond {
				t.Errorf("byzantine: signature checks %v, messages received %v: want the votes' checks too", checks, received)
			}
		})
	}
}
