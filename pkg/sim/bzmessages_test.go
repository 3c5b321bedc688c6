package sim_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/byzantine"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/sim"
)

// bzElections is one honest byzantine cluster going through the
// benchmark's elections on a network that delivers within TMax: each
// election's messages (a broadcast counting once, steady traffic not
// counted) from its cause until the cluster agreed and fell quiet.
type bzElections struct {
	t      *testing.T
	c      *sim.Cluster
	timing election.Timing
	seed   uint64
}

// quietTicks is how long no message may be sent for an election to be
// over: a leader time-out and a lease, longer than any wait of the
// algorithm between two messages of one election.
func (e *bzElections) quietTicks() int { return e.timing.LeaderTimeoutTicks + e.timing.LeaseTicks + 2 }

// await ticks until the running members of ids follow leader in one term,
// leader reports leader, and no message was sent for quietTicks; it
// returns the messages sent since before.
func (e *bzElections) await(what string, ids []uint64, leader uint64, before int) int {
	e.t.Helper()
	deadline := e.c.Now() + 20*e.quietTicks()
	last, lastAt, agreed := before, e.c.Now(), false
	for e.c.Now() < deadline {
		e.c.Tick()
		if err := e.c.Err(); err != nil {
			e.t.Fatalf("seed %d, %s: %v", e.seed, what, err)
		}
		if sent, _ := e.c.Messages(); sent != last {
			last, lastAt = sent, e.c.Now()
		}
		agreed = e.agreed(ids, leader)
		if agreed && e.c.Now()-lastAt >= e.quietTicks() {
			return last - before
		}
	}
	e.t.Fatalf("seed %d, %s: no quiet agreement on %d by tick %d (agreed %t)", e.seed, what, leader, e.c.Now(), agreed)
	return 0
}

func (e *bzElections) agreed(ids []uint64, leader uint64) bool {
	lst, _ := e.c.Status(leader)
	if lst.Role != election.Leader || lst.Leader != leader {
		return false
	}
	for _, id := range ids {
		st, up := e.c.Status(id)
		if up && !e.c.Paused(id) && (st.Leader != leader || st.Term != lst.Term) {
			return false
		}
	}
	return true
}

func (e *bzElections) sent() int {
	s, _ := e.c.Messages()
	return s
}

// runBzElections runs seed's cluster of n through a crash of the leader,
// its restart, a hang (pause) of it, its return and its resignation, and
// reports each election's messages.
func runBzElections(t *testing.T, seed uint64, n int, report func(kind string, msgs int)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x627a6d7367))
	members := make([]uint64, 0, n)
	for _, i := range rng.Perm(3 * n)[:n] {
		members = append(members, uint64(i)+1)
	}
	slices.Sort(members)
	timing := election.DefaultLeaseTiming(n)
	keys, signers, err := sim.MemberKeys(members)
	if err != nil {
		t.Fatal(err)
	}
	drift := int64(election.DefaultMaxDrift * 1_000_000)
	rates := make(map[uint64]int64)
	for _, id := range members {
		rates[id] = 1_000_000 - drift + rng.Int64N(2*drift+1)
	}
	events := float64(rng.IntN(2))
	c, err := sim.New(sim.Config{
		Members: members, Timing: timing, Leases: true, Rates: rates, Rand: rng, Keys: keys,
		Network: sim.Network{MinDelay: 1, MaxDelay: sim.TMax, Events: events},
		Factory: func(cfg election.Config) (election.Machine, error) {
			return byzantine.New(byzantine.Config{Config: cfg, Cluster: sim.ByzantineCluster, Signer: signers[cfg.ID], Keys: keys})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &bzElections{t: t, c: c, timing: timing, seed: seed}
	top, next := members[n-1], members[n-2]
	survivors := members[:n-1]
	for _, id := range rng.Perm(n) {
		c.Start(members[id])
		c.Run(rng.IntN(3))
	}
	e.await("cold start", members, top, e.sent())

	b := e.sent()
	c.Crash(top)
	report("crash", e.await(fmt.Sprintf("crash of %d (events %v)", top, events), survivors, next, b))
	b = e.sent()
	c.Start(top)
	report("rejoin", e.await("rejoin", members, top, b))
	b = e.sent()
	c.Pause(top)
	report("hang", e.await("hang", survivors, next, b))
	c.Resume(top)
	e.await("resume", members, top, e.sent())
	b = e.sent()
	c.Resign(top)
	report("hand-over", e.await("hand-over", survivors, next, b))
}

// The messages of each election of an honest byzantine cluster stay
// within the bounds the benchmark shows beside its own counts
// (sim.MessageBound for a failover or hand-over, sim.StartBound for the
// return of the highest ID), over many seeds, clock rates and delays,
// with connection events and without. SIM_BZ_MESSAGE_SEEDS changes the
// number of seeds per size.
func TestByzantineMessagesWithinBound(t *testing.T) {
	seeds := 100
	if testing.Short() || raceByzantineSeeds < 100 {
		seeds = 10
	}
	if v, ok := envInt(t, "SIM_BZ_MESSAGE_SEEDS"); ok {
		seeds = v
	}
	spec := sim.Spec{Name: "byzantine"}
	for _, n := range []int{4, 7} {
		worst := map[string]int{}
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			runBzElections(t, seed, n, func(kind string, msgs int) {
				bound := sim.MessageBound(spec, n)
				if kind == "rejoin" {
					bound = sim.StartBound(spec, n)
				}
				if msgs > bound {
					t.Errorf("n=%d seed %d: %s took %d messages, above the bound %d", n, seed, kind, msgs, bound)
				}
				worst[kind] = max(worst[kind], msgs)
			})
		}
		t.Logf("n=%d, %d seeds: most messages per crash %d, hang %d, hand-over %d (bound %d); rejoin %d (bound %d)", n, seeds,
			worst["crash"], worst["hang"], worst["hand-over"], sim.MessageBound(spec, n), worst["rejoin"], sim.StartBound(spec, n))
	}
}
