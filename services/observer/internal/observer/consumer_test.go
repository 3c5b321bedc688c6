package observer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-election/baton/internal/batontest"
)

// The observer survives the loss of its durable consumer (an operator
// deleted it, or the whole stream): it sets them up again and resumes
// after the last announcement it recorded, so that an announcement made
// meanwhile is recorded, and none twice.
func TestConsumerDeletedIsCreatedAgain(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(url, t.TempDir())
	o := startObserver(t, cfg, nil)
	// acked waits until the consumer has acknowledged every announcement
	// up to the stream sequence seq.
	acked := func(what string, seq uint64) {
		t.Helper()
		o.waitFor(t, what, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c, err := js.Consumer(ctx, cfg.Stream, cfg.Consumer)
			if err != nil {
				return false
			}
			info, err := c.Info(ctx)
			return err == nil && info.AckFloor.Stream == seq && info.NumAckPending == 0
		})
	}
	counts := func() string {
		return fmt.Sprintf("%v recorded, %v duplicate",
			counter(o.metrics.announcements.WithLabelValues("recorded")), counter(o.metrics.announcements.WithLabelValues("duplicate")))
	}

	announce(t, nc, announcement("default", 3, 1, t0))
	acked("term 1 acknowledged", 1)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := js.DeleteConsumer(ctx, cfg.Stream, cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	announce(t, nc, announcement("default", 4, 2, t0.Add(time.Second)))
	o.waitFor(t, "term 2, announced after the consumer was deleted", func() bool { return o.leaderships("default") == 2 })
	// The counters move before the acknowledgement: wait for it.
	acked("term 2 acknowledged by the new consumer", 2)
	if got, want := counts(), "2 recorded, 0 duplicate"; got != want {
		t.Errorf("announcements: %s, want %s (resumed after term 1)", got, want)
	}

	// A restart finds the consumer created again, from a sequence, and
	// keeps it as it is.
	o.stop()
	o = startObserver(t, cfg, nil)
	announce(t, nc, announcement("default", 4, 3, t0.Add(2*time.Second)))
	acked("term 3 acknowledged after a restart", 3)
	if got, want := counts(), "1 recorded, 0 duplicate"; got != want {
		t.Errorf("announcements after a restart: %s, want %s", got, want)
	}

	// Without its stream, the stream sequence starts again at 1: the
	// observer must not resume after the old stream's sequence.
	if err := js.DeleteStream(ctx, cfg.Stream); err != nil {
		t.Fatal(err)
	}
	acked("the stream and the consumer created again", 0)
	announce(t, nc, announcement("default", 5, 4, t0.Add(3*time.Second)))
	// The counters move before the acknowledgement: wait for it.
	acked("term 4, the first announcement of the new stream, acknowledged", 1)
	if n := o.leaderships("default"); n != 4 {
		t.Errorf("%d leaderships recorded, want 4", n)
	}
	if got, want := counts(), "2 recorded, 0 duplicate"; got != want {
		t.Errorf("announcements: %s, want %s", got, want)
	}
	o.waitFor(t, "consuming again", func() bool { return o.consuming.Load() })
}

// The cursor starts a consumer created again at the first announcement
// the history may lack: after the highest one done, at the lowest one
// that failed or that the consumer had not had acknowledged, and from 1
// on a stream created again.
func TestCursor(t *testing.T) {
	s1, s2 := t0, t0.Add(time.Hour)
	var c cursor
	check := func(what string, stream time.Time, want uint64) {
		t.Helper()
		if got := c.start(stream); got != want {
			t.Errorf("%s: start = %d, want %d", what, got, want)
		}
	}
	check("unknown stream", s1, 1)
	c.adopt(s1, 0, 4, true) // set up on a consumer with 5.. unacknowledged
	check("pending at set-up", s1, 5)
	c.handled(s1, 5)
	c.handled(s1, 6)
	check("pending at set-up, then done", s1, 5)
	c.adopt(s1, 5, 4, false) // created again from 5
	check("created again", s1, 7)
	c.failed(s1, 8)
	c.handled(s1, 9)
	check("a failure before a success", s1, 8)
	c.handled(s1, 8)
	check("the failure recorded since", s1, 8) // a duplicate at worst
	c.adopt(s1, 8, 7, false)
	check("created again from the failure", s1, 10)
	c.handled(s2, 30)
	c.failed(s2, 2)
	check("notes of another stream", s1, 10)
	check("another stream", s2, 1)
	c.adopt(s2, 1, 0, false)
	check("the new stream", s2, 1)
	c.handled(s2, 3)
	check("the new stream, 3 done", s2, 4)
}
