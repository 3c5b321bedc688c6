package recorder

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-election/baton/services/observer/internal/history"
)

func TestTracker(t *testing.T) {
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type act struct {
		at         int // ms
		node, term uint64
		resign     bool
		want       string // split-brain reason, "" for none
	}
	for _, tc := range []struct {
		name string
		acts []act
	}{
		{"takeover with a heartbeat in flight", []act{
			{at: 0, node: 1, term: 1}, {at: 50, node: 1, term: 1},
			{at: 60, node: 2, term: 2}, {at: 100, node: 1, term: 1}, {at: 110, node: 2, term: 2},
		}},
		{"superseded leader keeps heartbeating", []act{
			{at: 0, node: 1, term: 1}, {at: 60, node: 2, term: 2},
			{at: 100, node: 1, term: 1}, {at: 170, node: 1, term: 1, want: history.SplitStaleLeader},
			{at: 220, node: 1, term: 1}, // reported once
		}},
		{"two nodes claim one term", []act{
			{at: 0, node: 1, term: 3}, {at: 10, node: 2, term: 3, want: history.SplitSameTerm},
		}},
		{"new leader after the old one fell silent", []act{
			{at: 0, node: 1, term: 1}, {at: 500, node: 2, term: 2}, {at: 550, node: 2, term: 2},
		}},
		{"new leader after a resign", []act{
			{at: 0, node: 1, term: 1}, {at: 5, node: 1, resign: true}, {at: 10, node: 2, term: 2},
		}},
		{"stale leader returns after a pause", []act{
			{at: 0, node: 2, term: 2}, {at: 150, node: 2, term: 2},
			{at: 160, node: 1, term: 1}, {at: 300, node: 1, term: 1, want: history.SplitStaleLeader},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(200*time.Millisecond, 100*time.Millisecond)
			for i, a := range tc.acts {
				if a.resign {
					tr.resign("c", a.node)
					continue
				}
				got := tr.act("c", a.node, a.term, ms(a.at))
				switch {
				case a.want == "" && len(got) != 0:
					t.Errorf("act %d (node %d term %d at %dms): split brain %+v, want none", i, a.node, a.term, a.at, got)
				case a.want != "" && (len(got) != 1 || got[0].Reason != a.want):
					t.Errorf("act %d (node %d term %d at %dms): %+v, want one %s", i, a.node, a.term, a.at, got, a.want)
				}
			}
		})
	}
}

func TestTrackerLastSeen(t *testing.T) {
	tr := newTracker(200*time.Millisecond, 100*time.Millisecond)
	tr.act("c", 1, 1, t0)
	tr.act("c", 1, 1, t0.Add(50*time.Millisecond))
	if last, ok := tr.lastSeen("c", 1, 1); !ok || !last.Equal(t0.Add(50*time.Millisecond)) {
		t.Errorf("lastSeen = %v, %v; want t0+50ms", last, ok)
	}
	if _, ok := tr.lastSeen("c", 1, 2); ok {
		t.Error("lastSeen of a term the node never acted with")
	}
	if !tr.alive("c", 1, 1, t0.Add(250*time.Millisecond)) || tr.alive("c", 1, 1, t0.Add(251*time.Millisecond)) {
		t.Error("alive must hold exactly for the window after the last act")
	}
	tr.resign("c", 1)
	if tr.alive("c", 1, 1, t0.Add(60*time.Millisecond)) {
		t.Error("alive after resign")
	}
}

// Asking about a cluster whose nodes were never heard (the silence check
// does, for every cluster with a current leadership, each tick) keeps
// nothing: an idle cluster costs the tracker no memory.
func TestTrackerQueriesKeepNothing(t *testing.T) {
	tr := newTracker(200*time.Millisecond, 100*time.Millisecond)
	for i := range 1000 {
		cluster := fmt.Sprintf("shard-%d", i)
		tr.lastSeen(cluster, 1, 1)
		tr.alive(cluster, 1, 1, t0)
		tr.resign(cluster, 1)
	}
	if len(tr.clusters) != 0 {
		t.Errorf("the tracker holds %d clusters after queries alone, want 0", len(tr.clusters))
	}
}
