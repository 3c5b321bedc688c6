package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
)

// spreadRank is the rank of the spread tests: in it, the highest-ranked
// of members 1..n is not n for the sizes tested.
var spreadRank = election.Spread(testCluster)

// TestSpreadHighestLeads checks that under election.Spread the
// highest-ranked live member leads, not the highest ID, with nothing
// wrong, and after crashes, blips, drops and delays.
func TestSpreadHighestLeads(t *testing.T) {
	for _, n := range sizes() {
		var ids []uint64
		for id := uint64(1); id <= uint64(n); id++ {
			ids = append(ids, id)
		}
		if top := spreadRank.Highest(ids); top == uint64(n) {
			t.Fatalf("n=%d: member %d ranks highest in %q, as by ID: pick another cluster name", n, top, testCluster)
		}
		for _, sc := range []scenario{
			{n: n, maxDelay: 2, settle: 0, end: 300, rank: spreadRank},
			{n: n, crashes: true, blips: true, drops: true, maxDelay: 8, settle: 300, end: 900, rank: spreadRank},
		} {
			runScenario(t, "spread", sc, seedsPerSize/4, func(h *harness) {
				if l, want := h.leader(), h.highestLiveHonest(); l != want {
					h.fatalf("leader %d at the end, want the highest-ranked live member %d", l, want)
				}
			})
		}
	}
}

// TestSpreadDesignated checks that term t's designated leader is index
// (t−1) mod n of the members in decreasing rank.
func TestSpreadDesignated(t *testing.T) {
	h := newHarness(t, 1, scenario{n: 4, maxDelay: 2, end: 1, rank: spreadRank})
	m := h.members[1].m
	want := []uint64{1, 2, 3, 4}
	spreadRank.Sort(want)
	for i := range 8 {
		if got := m.designated(uint64(i + 1)); got != want[3-i%4] {
			t.Errorf("term %d: designated %d, want %d (members in increasing rank %v)", i+1, got, want[3-i%4], want)
		}
	}
}
