package observer

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/baton-election/baton/services/observer/internal/recorder"
)

// observer_record_lag_seconds observes, per leadership recorded, the delay
// from its announcement's at to its record: not for a duplicate, and 0
// for an announcement stamped after the observer's clock.
func TestRecordLag(t *testing.T) {
	clock := &fakeClock{now: t0.Add(300 * time.Millisecond)}
	a := newAPI(t, clock)
	rec := recorder.New(recorder.Config{Window: time.Hour, Grace: time.Millisecond, AskAfter: time.Hour}, a.store)
	record := func(leader, term uint64, at time.Time) {
		t.Helper()
		ann := announcement("a", leader, term, at)
		if _, err := a.recordAnnouncement("a", ann, rec.Announced("a", ann, clock.Now())); err != nil {
			t.Fatal(err)
		}
	}
	record(1, 1, t0)
	record(1, 1, t0) // a duplicate
	clock.Set(t0.Add(2 * time.Second))
	record(2, 2, t0.Add(3*time.Second)) // a leader's clock ahead
	var m dto.Metric
	a.metrics.recordLag.Write(&m)
	h := m.GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() < 0.299 || h.GetSampleSum() > 0.301 {
		t.Errorf("observer_record_lag_seconds: %d samples summing %vs, want 2 summing 0.3s", h.GetSampleCount(), h.GetSampleSum())
	}
}
