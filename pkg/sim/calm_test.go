package sim_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// calmSeeds is how many seeds of the calm runs go test runs per
// algorithm (50 with -short or the race detector); SIM_CALM_SEEDS changes
// it, SIM_CALM_SEED=N runs seed N alone and prints its trace.
const calmSeeds = 200

// The shape of a calm run: how long its schedule lasts, and the most it
// delays, pauses and bursts.
const (
	calmTicks       = 3000
	calmMaxExtra    = 15 // ticks added to the leader's copies, or to every copy in a burst
	calmMaxBurst    = 50 // ticks a burst lasts, from 5
	calmMaxFollower = 40 // ticks a follower is paused
	calmMaxLeader   = 12 // ticks the leader is paused
)

// A calm run: nothing fails, things are only slow. Once a cluster of 3, 5
// or 7 members agrees, for calmTicks ticks the leader's copies are late by
// a varying delay, every copy is late during bursts, and followers and the
// leader are descheduled for a while and settle what waited for them
// (ResumeSettling), in a mix drawn per seed; then the network is quiet
// for four leader time-outs. A leader whose copies reached every follower
// within less than a leader time-out of each other, from the schedule's
// start up to the first new term (or to the end, when none came; a paused
// follower's copies count from when they reached it), was never silent
// for the time-out and must not be replaced: no node may claim a term,
// and the cluster must end as it began, on the same leader and term. When
// some follower did go a time-out without hearing it, the invariants must
// hold and the cluster must agree again. At least a third of the seeds
// must be calm, or the oracle would hardly be tested.
func TestCalmBully(t *testing.T) { runCalm(t, bullySpec) }
func TestCalmRing(t *testing.T)  { runCalm(t, ringSpec) }
func TestCalmPaxos(t *testing.T) { runCalm(t, paxosSpec) }

// calmResult is the outcome of one calm run.
type calmResult struct {
	members      []uint64
	leader, term uint64 // agreed before the schedule
	bound        int    // the leader time-out
	// calm: every follower's largest gap was below bound. gap is the
	// largest gap of any follower, at node gapAt, ending at tick gapEnd.
	calm                bool
	gap, gapEnd         int
	gapAt               uint64
	firstClaim, claimed int // tick of the first claim during or after the schedule (-1: none), and how many
	err                 error
}

func calmTiming(spec sim.Spec, n int) election.Timing {
	if spec.Leases {
		return election.DefaultLeaseTiming(n)
	}
	return election.DefaultTiming(n)
}

// calmRun runs the calm run of seed: the seed alone decides everything.
func calmRun(seed uint64, spec sim.Spec, trace io.Writer) calmResult {
	rng := rand.New(rand.NewPCG(seed, 0x63616c6d)) // the schedule's
	n := 5
	switch seed % 10 {
	case 3:
		n = 3
	case 7:
		n = 7
	}
	members := make([]uint64, 0, n)
	for _, i := range rng.Perm(30)[:n] {
		members = append(members, uint64(i)+1)
	}
	timing := calmTiming(spec, n)
	res := calmResult{members: members, bound: timing.LeaderTimeoutTicks, firstClaim: -1}
	quiet := sim.Quiet(sim.TMax)
	c, err := sim.New(sim.Config{Members: members, Timing: timing, Factory: spec.Factory, Leases: spec.Leases,
		Rand: rand.New(rand.NewPCG(seed, 1)), Network: quiet, Trace: trace})
	if err != nil {
		res.err = err
		return res
	}
	note := func(format string, args ...any) {
		if trace != nil {
			fmt.Fprintf(trace, "%5d  %s\n", c.Now(), fmt.Sprintf(format, args...))
		}
	}
	note("calm run, seed %d: %s, members %v, timing %+v", seed, spec.Name, members, timing)
	for _, id := range members {
		c.Start(id)
	}

	// Agreement, held for a leader time-out and a coordinator time-out,
	// so that nothing of the election is left in flight.
	limit := sim.Bound(spec, n, timing)
	hold := timing.LeaderTimeoutTicks + timing.CoordinatorTicks
	since := -1
	for since < 0 || c.Now()-since < hold {
		if c.Now() > limit+hold {
			res.err = fmt.Errorf("no lasting agreement within %d ticks of the start: %s", limit+hold, views(c))
			return res
		}
		c.Tick()
		if err := c.Err(); err != nil {
			res.err = err
			return res
		}
		leader, term, ok := c.Agreement()
		switch {
		case !ok:
			since = -1
		case since < 0 || leader != res.leader || term != res.term:
			since, res.leader, res.term = c.Now(), leader, term
		}
	}
	leader, claims := res.leader, c.Claims()
	var followers []uint64
	for _, id := range c.Members() {
		if id != leader {
			followers = append(followers, id)
		}
	}
	note("schedule from here: leader %d term %d, %d ticks", leader, res.term, calmTicks)

	// When each of the leader's copies reached each follower.
	start := c.Now()
	heard := make(map[uint64][]int, n)
	// With leases (Paxos) the leader needs a majority's answers too: when
	// each follower's copies reached the leader.
	answers := make(map[uint64][]int, n)
	c.OnDeliver(func(to uint64, m protocol.Message, arrived int) {
		switch {
		case m.From == leader && to != leader:
			heard[to] = append(heard[to], arrived)
		case to == leader && spec.Leases:
			answers[m.From] = append(answers[m.From], arrived)
		}
	})

	// The schedule's mix, drawn per seed, so that some seeds are calm and
	// some are not: how late the leader's copies may be, and whether
	// their delay jumps to each new value or moves to it a tick every
	// ramp ticks (a queue that builds up and drains); how late a burst
	// makes every copy; how often, on average, a burst starts, a follower
	// is paused, the leader is paused (0: never).
	// With leases the leader needs its round trips within its lease (17
	// ticks by default) and a majority's answers: smaller delays and
	// shorter pauses of the followers, or few seeds would be calm.
	mostExtra, mostFollower := calmMaxExtra, calmMaxFollower
	if spec.Leases {
		mostExtra, mostFollower = calmMaxExtra/2, calmMaxFollower/2
	}
	maxExtra, ramp := rng.IntN(mostExtra+1), []int{0, 2, 3, 4}[rng.IntN(4)]
	maxBurst := rng.IntN(mostExtra/2 + 1)
	burstEvery := []int{0, 100 + rng.IntN(400)}[rng.IntN(2)]
	pauseEvery := []int{0, 100 + rng.IntN(400), 100 + rng.IntN(400), 100 + rng.IntN(400)}[rng.IntN(4)] // per follower
	leaderPauseEvery := []int{0, 0, 300 + rng.IntN(700)}[rng.IntN(3)]
	note("schedule: the leader's copies up to %d ticks late (a tick every %d ticks; 0: at once), bursts up to %d ticks every %d, pauses every %d ticks per follower, of the leader every %d",
		maxExtra, ramp, maxBurst, burstEvery, pauseEvery, leaderPauseEvery)
	every := func(n int) bool { return n > 0 && rng.IntN(n) == 0 }
	// tick runs one tick, noting the first new term, and reports a
	// violation.
	tick := func() error {
		c.Tick()
		if c.Claims() > claims && res.firstClaim < 0 {
			res.firstClaim = c.Now()
		}
		return c.Err()
	}
	extra, target, shift, burstEnd := 0, 0, start, -1
	// With leases (Paxos), the longest round trip from the leader and
	// back that the schedule allowed: a leader whose proposals are
	// answered later than its lease (LeaderLeaseTicks) cannot hold it,
	// however regular the gaps.
	burstExtra, roundTrip := 0, 0
	resumeAt := make(map[uint64]int, n)
	for c.Now() < start+calmTicks {
		now := c.Now()
		if now >= shift {
			target, shift = rng.IntN(maxExtra+1), now+100+rng.IntN(400)
		}
		switch {
		case ramp == 0:
			extra = target
		case (now-start)%ramp == 0 && extra < target:
			extra++
		case (now-start)%ramp == 0 && extra > target:
			extra--
		}
		c.SetSendDelay(leader, extra)
		switch {
		case now == burstEnd:
			note("burst ends")
			_ = c.SetNetwork(quiet)
			burstEnd, burstExtra = -1, 0
		case burstEnd < 0 && every(burstEvery):
			net := quiet
			net.Extra = rng.IntN(maxBurst + 1)
			burstExtra = net.Extra
			burstEnd = now + 5 + rng.IntN(calmMaxBurst-4)
			note("burst: every copy %d ticks later until tick %d", net.Extra, burstEnd)
			_ = c.SetNetwork(net)
		}
		for _, id := range c.Members() {
			often, longest := pauseEvery, mostFollower
			if id == leader {
				often, longest = leaderPauseEvery, calmMaxLeader
			}
			switch {
			case c.Paused(id) && now >= resumeAt[id]:
				c.ResumeSettling(id)
			case !c.Paused(id) && every(often):
				c.Pause(id)
				resumeAt[id] = now + 1 + rng.IntN(longest)
			}
		}
		if res.firstClaim < 0 {
			roundTrip = max(roundTrip, extra+2*burstExtra+2*quiet.MaxDelay)
		}
		if err := tick(); err != nil {
			res.err = err
			return res
		}
	}
	for _, id := range c.Members() {
		c.ResumeSettling(id)
	}
	c.SetSendDelay(leader, 0)
	_ = c.SetNetwork(quiet)
	end := c.Now()
	note("schedule ends")

	// The calm period: a few leader time-outs on the quiet network.
	for c.Now() < end+4*timing.LeaderTimeoutTicks {
		if err := tick(); err != nil {
			res.err = err
			return res
		}
	}
	c.OnDeliver(nil)

	// The gaps, from the schedule's start up to the first new term (or
	// to the end of the calm period, when none came): a silence that a
	// new term began cannot excuse it.
	cut := c.Now()
	if res.firstClaim >= 0 {
		cut = res.firstClaim
	}
	res.calm = true
	// Each follower's largest gap in what it heard from the leader, and
	// with leases, in what the leader heard from it: a leader needs the
	// answers of a majority only, so that many followers may fall
	// silent to it.
	largestGap := func(id uint64, seen []int) int {
		prev, largest := start, 0
		for _, at := range append(seen, cut) {
			at = min(at, cut) // the silence up to the cut counts too
			if at-prev > largest {
				largest = at - prev
				if largest > res.gap {
					res.gap, res.gapAt, res.gapEnd = largest, id, at
				}
			}
			prev = max(prev, at)
		}
		return largest
	}
	silentToLeader := 0
	for _, id := range followers {
		res.calm = res.calm && largestGap(id, heard[id]) < res.bound
		if spec.Leases && largestGap(id, answers[id]) >= res.bound {
			silentToLeader++
		}
	}
	if silentToLeader > n-(n/2+1) {
		res.calm = false
	}
	if spec.Leases && roundTrip >= timing.LeaderLeaseTicks {
		res.calm = false
		note("round trips up to %d ticks, the lease %d: not calm", roundTrip, timing.LeaderLeaseTicks)
	}
	res.claimed = c.Claims() - claims
	note("largest gap %d ticks, at %d up to tick %d; %d terms claimed, the first at tick %d (calm: %v)",
		res.gap, res.gapAt, res.gapEnd, res.claimed, res.firstClaim, res.calm)

	// A cluster that changed leader gets up to the bound of the random
	// runs to agree again.
	got, term, ok := c.Agreement()
	for !ok && c.Now() < end+limit {
		c.Tick()
		if err := c.Err(); err != nil {
			res.err = err
			return res
		}
		got, term, ok = c.Agreement()
	}
	switch {
	case res.calm && (!ok || got != leader || term != res.term || res.claimed > 0):
		res.err = fmt.Errorf("calm (largest gap %d < %d ticks, at %d up to tick %d), yet the leader changed: agreed %v on leader %d term %d, want leader %d term %d; %d terms claimed, the first at tick %d: %s",
			res.gap, res.bound, res.gapAt, res.gapEnd, ok, got, term, leader, res.term, res.claimed, res.firstClaim, views(c))
	case !ok:
		res.err = fmt.Errorf("no agreement %d ticks after the schedule (largest gap %d ticks at %d up to tick %d): %s",
			c.Now()-end, res.gap, res.gapAt, res.gapEnd, views(c))
	}
	if res.err != nil {
		note("FAILED: %v", res.err)
	}
	return res
}

// views renders every node's view, for failure messages.
func views(c *sim.Cluster) string {
	var b strings.Builder
	for _, id := range c.Members() {
		st, up := c.Status(id)
		if !up {
			fmt.Fprintf(&b, "[%d down] ", id)
			continue
		}
		fmt.Fprintf(&b, "[%d %v leader=%d term=%d] ", id, st.Role, st.Leader, st.Term)
	}
	return strings.TrimSpace(b.String())
}

func runCalm(t *testing.T, spec sim.Spec) {
	if seed, ok := envInt(t, "SIM_CALM_SEED"); ok {
		var trace strings.Builder
		res := calmRun(uint64(seed), spec, &trace)
		t.Log("\n" + trace.String())
		if res.err != nil {
			t.Fatalf("seed %d: %v", seed, res.err)
		}
		t.Logf("seed %d (members %v): calm %v, largest gap %d ticks (bound %d), %d terms claimed", seed, res.members, res.calm, res.gap, res.bound, res.claimed)
		return
	}
	seeds := calmSeeds
	if testing.Short() || raceSeeds < defaultSeeds {
		seeds = 50 // the race detector slows the simulator tenfold
	}
	if v, ok := envInt(t, "SIM_CALM_SEEDS"); ok {
		seeds = v
	}
	calm, changed := 0, 0 // changed: seeds not calm whose leader changed
	var failed []uint64
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		res := calmRun(seed, spec, nil)
		if res.calm {
			calm++
		} else if res.claimed > 0 {
			changed++
		}
		if res.err == nil {
			continue
		}
		failed = append(failed, seed)
		if len(failed) > 10 {
			continue
		}
		kind := "liveness"
		switch {
		case errors.Is(res.err, sim.ErrInvariant):
			kind = "safety"
		case res.calm:
			kind = "calm leader replaced"
		}
		if len(failed) == 1 {
			// Replay the first with the trace on: the same seed must
			// fail the same way.
			var trace strings.Builder
			again := calmRun(seed, spec, &trace)
			lines := strings.Split(trace.String(), "\n")
			if len(lines) > 400 {
				lines = append(lines[:50], append([]string{"..."}, lines[len(lines)-350:]...)...)
			}
			t.Logf("trace of seed %d (shortened; replay for all of it):\n%s", seed, strings.Join(lines, "\n"))
			if again.err == nil || again.err.Error() != res.err.Error() {
				t.Errorf("seed %d does not replay: got %v, want %v", seed, again.err, res.err)
			}
		}
		t.Errorf("%s, seed %d (members %v): %s: %v\nreplay with SIM_CALM_SEED=%d go test ./pkg/sim -run '%s$' -v",
			spec.Name, seed, res.members, kind, res.err, seed, t.Name())
	}
	t.Logf("%s: %d seeds, %d calm (every gap below the leader time-out), %d not calm, %d of them with a new term; %d failed",
		spec.Name, seeds, calm, seeds-calm, changed, len(failed))
	if len(failed) > 10 {
		t.Errorf("%d seeds failed in all: %v", len(failed), failed)
	}
	if 3*calm < seeds {
		t.Errorf("%d calm seeds of %d, want at least a third: the oracle would hardly be tested", calm, seeds)
	}
}

// The knobs of the calm runs do what they say: a slow sender's copies, and
// every copy in a burst, arrive that much later, and a paused node's copies
// are seen with the tick they reached it, not the tick it resumed.
func TestCalmKnobs(t *testing.T) {
	ids := []uint64{1, 2, 3}
	var trace strings.Builder
	// A leader time-out long enough that no follower probes its leader:
	// the heartbeats alone are seen.
	timing := election.DefaultTiming(3)
	timing.LeaderTimeoutTicks = 60
	c, err := sim.New(sim.Config{Members: ids, Timing: timing, Factory: bullySpec.Factory,
		Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Network{MinDelay: 1, MaxDelay: 1}, Trace: &trace})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		c.Start(id)
	}
	agree(t, c, 200, &trace)
	c.Run(50)
	var heard []int // when the leader's heartbeats reached 1
	c.OnDeliver(func(to uint64, m protocol.Message, arrived int) {
		if to == 1 && m.From == 3 && m.Type == protocol.TypeHeartbeat {
			heard = append(heard, arrived)
		}
	})
	// gaps runs c for ticks ticks after do and returns the gaps between
	// the heartbeats that reached 1 meanwhile, the first counted from the
	// last one before.
	gaps := func(do func(), ticks int) []int {
		t.Helper()
		heard = heard[len(heard)-1:]
		do()
		c.Run(ticks)
		var g []int
		for i := 1; i < len(heard); i++ {
			g = append(g, heard[i]-heard[i-1])
		}
		return g
	}
	c.Run(15) // a heartbeat reaches 1 first
	hb := election.DefaultHeartbeatTicks
	// steady: one gap is odd (the first after copies in flight, which
	// keep their delay), the others a heartbeat interval.
	steady := func(got []int, odd int) bool {
		others := slices.DeleteFunc(slices.Clone(got), func(g int) bool { return g == hb })
		return len(got) >= 3 && (odd == hb && len(others) == 0 || slices.Equal(others, []int{odd}))
	}
	quiet := sim.Network{MinDelay: 1, MaxDelay: 1}
	if got := gaps(func() {}, 40); !steady(got, hb) {
		t.Fatalf("steady heartbeats: gaps %v, want %d each", got, hb)
	}
	if got := gaps(func() { c.SetSendDelay(3, 7) }, 40); !steady(got, hb+7) {
		t.Fatalf("leader 7 ticks slower: gaps %v, want one of %d, the others %d", got, hb+7, hb)
	}
	burst := quiet
	burst.Extra = 4
	if got := gaps(func() { _ = c.SetNetwork(burst) }, 40); !steady(got, hb+4) {
		t.Fatalf("a burst of 4 ticks: gaps %v, want one of %d, the others %d", got, hb+4, hb)
	}
	// Back to no extra delay: later copies overtake those in flight,
	// and no gap is longer than the interval.
	if got := gaps(func() { c.SetSendDelay(3, 0); _ = c.SetNetwork(quiet) }, 40); slices.Max(got) != hb || got[len(got)-1] != hb {
		t.Fatalf("back to no delay: gaps %v, want none above %d", got, hb)
	}
	// Node 1 paused for 35 ticks: its copies are seen when it resumes,
	// with the ticks they reached it.
	if got := gaps(func() { c.Pause(1); c.Run(35); c.ResumeSettling(1) }, 5); !steady(got, hb) {
		t.Fatalf("1 paused: gaps %v, want %d each", got, hb)
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
}
