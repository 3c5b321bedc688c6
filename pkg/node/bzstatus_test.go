package node_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// A byzantine node answers /status with leader: null once it can no
// longer hold its leader certified and alive. At N = 4 the certified
// leader 4 hangs, 3 takes over, then 3 hangs too: two faults, more than
// f = 1, so 1 and 2 cannot certify a successor. Once 3's lease and the
// leader time-out have run out they answer leader null, as Paxos does,
// rather than leader 3 for good.
func TestSeamByzantineFollowersForgetADeadLeader(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Byzantine, 1, 2, 3, 4)
		s.keys = func(id uint64) (*signing.Signer, *signing.MemberKeys, *signing.MemberKeys) {
			return signers[id], keys, nil
		}
		for _, id := range s.members {
			s.add(id, nil)
		}
		ch := s.observer()
		for _, id := range s.members {
			s.nodes[id].run()
		}
		awaitLeader(t, ch, 4)
		s.nodes[4].conn.Hold() // it hangs: it sends nothing more
		next := awaitLeader(t, ch, 3)
		// 3's rounds bring its certificate to 1 and 2 (the bubble's
		// clock: no real time passes).
		time.Sleep(time.Duration(2*seamTiming.HeartbeatTicks) * node.DefaultTick)
		synctest.Wait()
		for _, id := range []uint64{1, 2} {
			if st := s.nodes[id].Status(); st.Leader == nil || *st.Leader != 3 || st.Term != next.Term {
				t.Fatalf("node %d: %+v, want leader 3 at term %d", id, st, next.Term)
			}
		}
		s.nodes[3].conn.Hold()
		timing := seamTiming
		gone := time.Duration(timing.LeaseTicks+timing.LeaderTimeoutTicks+timing.HeartbeatTicks+2) * node.DefaultTick
		time.Sleep(gone)
		synctest.Wait()
		for range 5 {
			for _, id := range []uint64{1, 2} {
				if st := s.nodes[id].Status(); st.Leader != nil || st.State == election.Leader.String() {
					leader := "null"
					if st.Leader != nil {
						leader = fmt.Sprint(*st.Leader)
					}
					t.Fatalf("node %d after its leader 3 hung for %v: leader %s, state %s, term %d; want leader null, not leading", id, gone, leader, st.State, st.Term)
				}
			}
			time.Sleep(time.Duration(timing.LeaderTimeoutTicks) * node.DefaultTick)
			synctest.Wait()
		}
	})
}
