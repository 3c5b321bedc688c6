package sim_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// hostileSeeds is how many seeds of the hostile run go test runs per
// algorithm (50 with -short or the race detector); SIM_HOSTILE_SEEDS
// changes it (SIM_HOSTILE_SEEDS=2000 is the longer run), SIM_HOSTILE_SEED=N
// runs seed N alone and prints its trace.
const hostileSeeds = 200

func TestHostileBully(t *testing.T) { runHostile(t, bullySpec, sim.HostileConfig{}) }
func TestHostileRing(t *testing.T)  { runHostile(t, ringSpec, sim.HostileConfig{}) }
func TestHostilePaxos(t *testing.T) { runHostile(t, paxosSpec, sim.HostileConfig{}) }

// With an even number of members two majorities share two members, so a
// lying acceptor cannot alone join two of them: Paxos keeps one leader at
// a time even when the liar promises and accepts anything.
func TestHostilePaxosAcceptorEven(t *testing.T) {
	for _, n := range []int{4, 6} {
		runHostileSize(t, paxosSpec, sim.HostileConfig{Acceptor: true}, n)
	}
}

func runHostile(t *testing.T, spec sim.Spec, hc sim.HostileConfig) { runHostileSize(t, spec, hc, 0) }

func runHostileSize(t *testing.T, spec sim.Spec, hc sim.HostileConfig, n int) {
	if seed, ok := envInt(t, "SIM_HOSTILE_SEED"); ok {
		var trace strings.Builder
		res := sim.RunHostile(uint64(seed), spec, n, hc, &trace)
		t.Log("\n" + trace.String())
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		return
	}
	seeds := hostileSeeds
	if testing.Short() || raceSeeds < defaultSeeds {
		seeds = 50 // the race detector slows the simulator tenfold
	}
	if v, ok := envInt(t, "SIM_HOSTILE_SEEDS"); ok {
		seeds = v
	}
	worst, worstSeed, slack := -1, uint64(0), 1<<30
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		res := sim.RunHostile(seed, spec, n, hc, nil)
		if res.Err != nil {
			var trace strings.Builder
			sim.RunHostile(seed, spec, n, hc, &trace)
			lines := strings.Split(trace.String(), "\n")
			if len(lines) > 300 {
				lines = append(lines[:20], append([]string{"..."}, lines[len(lines)-280:]...)...)
			}
			kind := "liveness"
			if errors.Is(res.Err, sim.ErrInvariant) {
				kind = "safety"
			}
			t.Fatalf("%s, seed %d (members %v): %s violation: %v\n%s\nreplay with SIM_HOSTILE_SEED=%d go test ./pkg/sim -run '%s' -v",
				spec.Name, seed, res.Members, kind, res.Err, strings.Join(lines, "\n"), seed, t.Name())
		}
		if res.Converged > worst {
			worst, worstSeed = res.Converged, seed
		}
		slack = min(slack, res.Bound-res.Converged)
	}
	t.Logf("%s (size %d, %+v): %d hostile seeds, no violation; slowest agreement %d ticks after the liar fell silent (seed %d); least margin to the bound %d ticks",
		spec.Name, n, hc, seeds, worst, worstSeed, slack)
}

// A member at the term ceiling: the last Election, Coordinator and heartbeat (and, for Paxos,
// Prepare and Propose) re-sent once each with term 2^62 by a member, then
// the leader crashes: the cluster elects again. Before terms were bounded,
// no node could claim after them, and Bully and the ring never elected
// again.
func TestSixMessagesAtTheCeiling(t *testing.T) {
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			var trace strings.Builder
			ids := []uint64{1, 2, 3, 4, 5}
			timing := election.DefaultTiming(len(ids))
			if spec.Leases {
				timing = election.DefaultLeaseTiming(len(ids))
			}
			c, err := sim.New(sim.Config{Members: ids, Timing: timing, Factory: spec.Factory, Leases: spec.Leases,
				Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Quiet(sim.TMax), Trace: &trace})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids[:4] {
				c.Start(id)
			}
			bound := sim.Bound(spec, len(ids), timing)
			leader, _, _ := agree(t, c, bound, &trace)
			if leader != 4 {
				t.Fatalf("leader %d, want 4", leader)
			}
			// Node 5 lies as itself: it is a member that does not run.
			lies := []protocol.Message{
				{Type: protocol.TypeElection, From: 5, Term: protocol.MaxTerm},
				{Type: protocol.TypeCoordinator, From: 5, Term: protocol.MaxTerm - 4}, // owned by 5 of 1..5
				{Type: protocol.TypeHeartbeat, From: 5, Term: protocol.MaxTerm - 4},
				{Type: protocol.TypeElection, From: 5, Term: protocol.MaxTerm},
				{Type: protocol.TypePrepare, From: 5, Term: protocol.MaxTerm - 4},
				{Type: protocol.TypePropose, From: 5, Term: protocol.MaxTerm - 4, Candidate: 5},
			}
			for i := range lies {
				lies[i].Inc = 1
				if err := c.Inject(lies[i]); err != nil {
					t.Fatalf("inject %v: %v", lies[i], err)
				}
			}
			c.Run(2 * sim.TMax)
			c.Crash(leader)
			got, term, _ := agree(t, c, bound, &trace)
			if got != 3 {
				t.Errorf("after the lies and the crash: leader %d, want 3", got)
			}
			if term >= protocol.MaxTerm/2 {
				t.Errorf("after the lies: term %d, want terms far from the ceiling", term)
			}
		})
	}
}
