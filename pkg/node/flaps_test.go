package node

import (
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// flapsTotal reads election_leader_flaps_total of n, failing the test if
// the node does not export it.
func flapsTotal(t *testing.T, n *Node) float64 {
	t.Helper()
	families, err := n.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "election_leader_flaps_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no metric election_leader_flaps_total")
	return 0
}

// A node counts the leader changes it saw reversed within a second
// (election_leader_flaps_total, at zero from the start): it followed 5,
// then 4, then 5 again 0.3 s after it took 4. A change back after 1.5 s is
// not counted.
func TestLeaderFlapsCounted(t *testing.T) {
	now := flapStart
	n, err := newTestNode(endpoint(1), endpoint(1), Config{
		Cluster:   "flaps",
		Algorithm: protocol.Bully,
		Election:  electionConfig(1, []uint64{1, 4, 5}),
		DataDir:   t.TempDir(),
		Logger:    testLogger(),
		Now:       func() time.Time { return now },
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if got := flapsTotal(t, n); got != 0 {
		t.Fatalf("flaps at start = %v, want 0", got)
	}
	for i, step := range []struct {
		after  time.Duration
		leader uint64
		want   float64
	}{
		{0, 5, 0},
		{10 * time.Second, 4, 0},
		{300 * time.Millisecond, 5, 1}, // 5 took back from 4 after 0.3 s
		{20 * time.Second, 4, 1},
		{1500 * time.Millisecond, 5, 1}, // after 1.5 s: not a flap
	} {
		now = now.Add(step.after)
		term := uint64(i + 1)
		n.record(election.Event{Kind: election.LeaderChanged, Leader: step.leader, Term: term})
		if got := flapsTotal(t, n); got != step.want {
			t.Errorf("after node %d at term %d: flaps = %v, want %v", step.leader, term, got, step.want)
		}
	}
}

var flapStart = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

// The counting rule, the observer's: a leadership that the leader before
// it took back less than flapWindow after it started. A slow change, a
// change to a third node, a new term of the same leader and a takeback
// at exactly the window are not flaps; in a chain A→B→A→B each short
// leadership between two of the other node is.
func TestFlapTracker(t *testing.T) {
	const a, b, c = 5, 4, 3
	for _, tc := range []struct {
		name    string
		leaders []uint64
		at      []time.Duration // after flapStart
		want    []bool          // whether each change reversed the one before
	}{
		{"flap", []uint64{a, b, a}, []time.Duration{0, 10 * time.Second, 10300 * time.Millisecond}, []bool{false, false, true}},
		{"slow change back", []uint64{a, b, a}, []time.Duration{0, 10 * time.Second, 11500 * time.Millisecond}, []bool{false, false, false}},
		{"back at exactly the window", []uint64{a, b, a}, []time.Duration{0, 10 * time.Second, 11 * time.Second}, []bool{false, false, false}},
		{"chain A→B→A→B", []uint64{a, b, a, b}, []time.Duration{0, 10 * time.Second, 10300 * time.Millisecond, 10600 * time.Millisecond}, []bool{false, false, true, true}},
		{"on to a third node", []uint64{a, b, c}, []time.Duration{0, 10 * time.Second, 10300 * time.Millisecond}, []bool{false, false, false}},
		{"same leader, new terms", []uint64{a, a, a}, []time.Duration{0, 10 * time.Second, 10300 * time.Millisecond}, []bool{false, false, false}},
		{"B twice between A", []uint64{a, b, b, a}, []time.Duration{0, 10 * time.Second, 10200 * time.Millisecond, 10300 * time.Millisecond}, []bool{false, false, false, false}},
		{"no leader known is no leadership", []uint64{a, b, 0, a}, []time.Duration{0, 10 * time.Second, 10100 * time.Millisecond, 10300 * time.Millisecond}, []bool{false, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f flapTracker
			for i, leader := range tc.leaders {
				short, got := f.seen(leader, flapStart.Add(tc.at[i]))
				if got != tc.want[i] {
					t.Errorf("change %d to node %d: reversed = %v, want %v", i, leader, got, tc.want[i])
				}
				if !got {
					continue
				}
				j := i - 1 // the leadership before, a zero leader skipped
				for tc.leaders[j] == 0 {
					j--
				}
				if short.leader != tc.leaders[j] || !short.at.Equal(flapStart.Add(tc.at[j])) {
					t.Errorf("change %d: the short leadership = %+v, want node %d from %v", i, short, tc.leaders[j], tc.at[j])
				}
			}
		})
	}
}
