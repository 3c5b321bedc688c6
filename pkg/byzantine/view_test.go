package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
)

// tickUntil ticks c until cond holds, at most limit ticks, and fails
// with what if it never does.
func (c *steadyCluster) tickUntil(limit int, what string, cond func() bool) {
	c.t.Helper()
	for range limit {
		if cond() {
			return
		}
		c.tick()
	}
	if !cond() {
		c.t.Fatalf("after %d ticks: %s never happened", limit, what)
	}
}

// A member names a leader only while it can hold it certified and
// alive: at N = 4, once the certified leader 4 and then its successor 3
// are gone (two faults, more than f = 1), members 1 and 2 cannot form a
// newer term, and after 3's lease and the leader time-out have run out
// they report no leader (the seeds' @), as Paxos does, instead of
// naming the dead 3 for good.
func TestLeaderViewEndsWithTheLeader(t *testing.T) {
	c := newSteadyCluster(t)
	timing := election.DefaultLeaseTiming(4)
	delete(c.ms, 4)
	c.tickUntil(20*timing.LeaderTimeoutTicks, "member 3 leads", func() bool {
		return c.ms[3].Status().Role == election.Leader
	})
	for _, id := range []uint64{1, 2} {
		if st := c.ms[id].Status(); st.Leader != 3 {
			t.Fatalf("member %d while 3 leads: %+v, want leader 3", id, st)
		}
	}
	delete(c.ms, 3)
	// Within the lease and the leader time-out it still names 3; after
	// both, no one, for good.
	gone := timing.LeaseTicks + timing.LeaderTimeoutTicks + 2
	for range gone {
		c.tick()
	}
	for range 10 * timing.LeaderTimeoutTicks {
		c.tick()
		for _, id := range []uint64{1, 2} {
			if st := c.ms[id].Status(); st.Leader != 0 || st.Role == election.Leader {
				t.Fatalf("member %d, %d ticks or more after its leader 3 died: %+v, want leader 0 (undefined) and not leading", id, gone, st)
			}
		}
	}
}

// A follower of a live leader keeps naming it between the rounds: the
// view is renewed by each certified round, and ends only after silence.
func TestLeaderViewLastsWhileTheLeaderRenews(t *testing.T) {
	c := newSteadyCluster(t)
	timing := election.DefaultLeaseTiming(4)
	for range 10 * timing.LeaderTimeoutTicks {
		c.tick()
		for id := uint64(1); id <= 3; id++ {
			if st := c.ms[id].Status(); st.Leader != 4 {
				t.Fatalf("member %d under a live leader: %+v, want leader 4", id, st)
			}
		}
	}
}
