package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
)

// seedsPerSize is how many seeds each scenario runs at each size.
const seedsPerSize = 100

// bound is the stated bound, in ticks, from the network settling to an
// honest leader: each of up to f+1 terms whose designated leader is
// down, lying or was penalized costs at most a leader time-out, a lease
// (grants of the last leader running out) and a few message delays, and
// a returning higher member one more such round.
func bound(n int, timing election.Timing) int {
	return (certify.F(n) + 3) * (timing.LeaderTimeoutTicks + timing.LeaseTicks + 8)
}

func runScenario(t *testing.T, name string, sc scenario, seeds int, check func(h *harness)) {
	t.Helper()
	if testing.Short() || underRace {
		seeds = min(seeds, 10)
	}
	worst, total := 0, 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		h := newHarness(t, seed, sc)
		d := h.run()
		if b := bound(sc.n, h.timing); d > b {
			h.fatalf("certified leader %d ticks after the network settled, bound %d", d, b)
		}
		worst, total = max(worst, d), total+d
		if check != nil {
			check(h)
		}
	}
	t.Logf("%s n=%d: %d seeds, leader after settling: mean %.1f ticks, worst %d (bound %d)",
		name, sc.n, seeds, float64(total)/float64(seeds), worst, bound(sc.n, election.DefaultLeaseTiming(sc.n)))
}

func sizes() []int { return []int{4, 7, 10} }

func TestNothingWrongHighestLeads(t *testing.T) {
	for _, n := range sizes() {
		sc := scenario{n: n, maxDelay: 2, settle: 0, end: 300}
		runScenario(t, "nothing wrong", sc, seedsPerSize, func(h *harness) {
			if l, want := h.leader(), h.highestLiveHonest(); l != want {
				h.fatalf("leader %d, want the highest live ID %d", l, want)
			}
		})
	}
}

func TestCrashesAndDelays(t *testing.T) {
	for _, n := range sizes() {
		sc := scenario{n: n, crashes: true, blips: true, drops: true, maxDelay: 8, settle: 300, end: 900}
		runScenario(t, "crashes, drops, delays", sc, seedsPerSize, func(h *harness) {
			if l, want := h.leader(), h.highestLiveHonest(); l != want {
				h.fatalf("leader %d at the end, want the highest live ID %d", l, want)
			}
		})
	}
}

func TestLeaderCutOff(t *testing.T) {
	for _, n := range sizes() {
		sc := scenario{n: n, blips: true, maxDelay: 4, settle: 300, end: 600}
		runScenario(t, "leaders cut off", sc, seedsPerSize, func(h *harness) {
			if l, want := h.leader(), h.highestLiveHonest(); l != want {
				h.fatalf("leader %d at the end, want the highest live ID %d", l, want)
			}
		})
	}
}

func TestOneTraitor(t *testing.T) {
	for _, n := range sizes() {
		sc := scenario{n: n, traitors: 1, drops: true, maxDelay: 6, settle: 200, end: 700}
		runScenario(t, "one traitor", sc, seedsPerSize, nil)
	}
}

func TestSilentLeaderReplaced(t *testing.T) {
	for _, n := range sizes() {
		sc := scenario{n: n, traitors: 1, silent: true, drops: true, maxDelay: 4, settle: 200, end: 600}
		runScenario(t, "highest falls silent", sc, seedsPerSize, func(h *harness) {
			if l, want := h.leader(), h.highestLiveHonest(); l != want {
				h.fatalf("leader %d at the end, want the highest honest ID %d", l, want)
			}
		})
	}
}

func TestFTraitorsAndCrashes(t *testing.T) {
	convicted := 0
	for _, n := range sizes() {
		sc := scenario{n: n, traitors: certify.F(n), crashes: true, drops: true, maxDelay: 6, settle: 300, end: 900}
		runScenario(t, "f traitors, crashes", sc, seedsPerSize, func(h *harness) {
			convicted += len(h.lied)
		})
	}
	if convicted == 0 {
		t.Errorf("no traitor was ever convicted, though traitors vote for two leaders")
	}
	t.Logf("traitors convicted: %d", convicted)
}

func TestDeterministic(t *testing.T) {
	sc := scenario{n: 7, traitors: 2, crashes: true, blips: true, drops: true, maxDelay: 6, settle: 200, end: 400}
	a, b := newHarness(t, 42, sc), newHarness(t, 42, sc)
	a.run()
	b.run()
	if a.trace.Sum64() != b.trace.Sum64() {
		t.Errorf("two runs of one seed sent different messages")
	}
	c := newHarness(t, 43, sc)
	c.run()
	if a.trace.Sum64() == c.trace.Sum64() {
		t.Errorf("two seeds sent the same messages: the trace checks nothing")
	}
}
