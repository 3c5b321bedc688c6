package sim_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/sim"
)

// TestLeaseSurvivesSettling runs the schedule of a follower descheduled
// past its deadline while the leader's renewals wait unread in its socket,
// which the runtime then handles before the deadline's tick (node.settle,
// modelled by ResumeSettling), with the other follower cut off from the
// leader meanwhile and the leader cut off from both just after. The
// renewal the settled follower accepts extends the leader's lease; a
// grant counted from the deadline's tick instead of the renewal's arrival
// ended before that lease did, and the two followers elected a second
// leader while the first still held its lease. The family of schedules
// varies where in the renewal cycle the follower is descheduled, for how
// long, and when the other follower is cut off, with true clocks and with
// clocks at the drift bound: at no instant may two nodes lead. (Before
// grants were counted from each Propose's arrival, the drifted clocks
// found two leaders, at phase 0 after 32 ticks descheduled with 1 cut off
// after 22, among others; the true clocks' margin of 5 ticks held.)
func TestLeaseSurvivesSettling(t *testing.T) {
	timing := election.DefaultLeaseTiming(3)
	// True clocks, and clocks at the drift bound the lease is computed
	// for, against the leader: the followers' fast, the leader's slow.
	drifts := []map[uint64]int64{nil, {1: 1_050_000, 2: 1_050_000, 3: 950_000}}
	runs, settled := 0, 0
	for run := range len(drifts) * timing.HeartbeatTicks {
		rates, phase := drifts[run/timing.HeartbeatTicks], run%timing.HeartbeatTicks
		for pause := timing.LeaderTimeoutTicks; pause <= 2*timing.LeaderTimeoutTicks; pause++ {
			for cut := 1; cut < pause; cut++ {
				var trace strings.Builder
				c, err := sim.New(sim.Config{
					Members: []uint64{1, 2, 3},
					Timing:  timing,
					Factory: paxosSpec.Factory,
					Leases:  true,
					Rates:   rates,
					Rand:    rand.New(rand.NewPCG(uint64(run), uint64(pause*1000+cut))),
					Network: sim.Network{MinDelay: 1, MaxDelay: 1},
					Trace:   &trace,
				})
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range []uint64{1, 2, 3} {
					c.Start(id)
				}
				c.Run(100)
				if leader, _, ok := c.Agreement(); !ok || leader != 3 {
					t.Fatalf("no agreement on 3 after 100 ticks:\n%s", trace.String())
				}
				c.Run(phase)
				c.Pause(2)
				c.Run(cut)
				c.Partition([]uint64{1}) // 1 no longer hears the leader
				c.Run(pause - cut)
				if c.ResumeSettling(2) {
					settled++
				}
				c.Run(1) // 2's acceptances reach 3, and no later renewal reaches 2
				c.Partition([]uint64{3})
				c.Run(200)
				runs++
				if err := c.Err(); err != nil {
					t.Fatalf("clock rates %v, descheduled at phase %d for %d ticks, 1 cut off after %d: %v\n%s", rates, phase, pause, cut, err, trace.String())
				}
			}
		}
	}
	if settled == 0 {
		t.Fatalf("none of %d schedules settled a backlog", runs)
	}
	t.Logf("%d schedules, %d settled", runs, settled)
}
