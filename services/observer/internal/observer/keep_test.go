package observer

import (
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
)

// With OBSERVER_KEEP, the history keeps the last leaderships; an observer
// that replays the whole stream afterwards (a new consumer) does not bring
// the dropped ones back, and a lower limit compacts at start.
func TestKeepCompactsTheHistory(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	dir := t.TempDir()
	cfg := testConfig(url, dir)
	cfg.Keep = 3

	o := startObserver(t, cfg, nil)
	for term := uint64(1); term <= 6; term++ {
		announce(t, nc, announcement("default", term%5+1, term, t0.Add(time.Duration(term)*time.Second)))
	}
	o.waitFor(t, "term 6 recorded", func() bool {
		l, ok := o.store.Latest("default")
		return ok && l.Term == 6
	})
	wantTerms := func(o *running, want ...uint64) {
		t.Helper()
		var got []leadershipJSON
		o.get(t, "/api/clusters/default/history", &got)
		if len(got) != len(want) {
			t.Fatalf("history = %v, want terms %v", got, want)
		}
		for i, l := range got {
			if l.Term != want[i] {
				t.Fatalf("history = %v, want terms %v", got, want)
			}
		}
	}
	// The record of term 6 is visible before the compaction it triggers
	// is done; the counter follows the compaction.
	o.waitFor(t, "three leaderships counted as compacted", func() bool {
		return counter(o.metrics.compacted.WithLabelValues("default")) == 3
	})
	wantTerms(o, 4, 5, 6)
	o.stop()

	// A new consumer replays terms 1 to 6: the dropped terms stay out.
	cfg.Consumer = "replay"
	o = startObserver(t, cfg, nil)
	o.waitFor(t, "the replay", func() bool {
		return counter(o.metrics.announcements.WithLabelValues("duplicate")) == 6
	})
	wantTerms(o, 4, 5, 6)
	o.stop()

	cfg.Keep = 2
	o = startObserver(t, cfg, nil)
	wantTerms(o, 5, 6)
}
