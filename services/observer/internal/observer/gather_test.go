package observer

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-election/baton/pkg/protocol"
)

// subjectMsg is a delivered message that has only a subject.
type subjectMsg struct {
	jetstream.Msg
	subject string
}

func (m subjectMsg) Subject() string { return m.subject }

// gather takes the announcements queued behind the first, of different
// clusters: one of a cluster already taken ends the batch and starts the
// next.
func TestGather(t *testing.T) {
	of := func(cluster string) delivery {
		return delivery{msg: subjectMsg{subject: protocol.LeaderSubject(cluster)}}
	}
	clusters := func(ds []delivery) []string {
		var names []string
		for _, d := range ds {
			c, _ := protocol.ClusterOf(d.msg.Subject())
			names = append(names, c)
		}
		return names
	}
	anns := make(chan delivery, 8)
	for _, c := range []string{"b", "a", "c"} {
		anns <- of(c)
	}
	batch, next := gather(of("a"), anns)
	if got := clusters(batch); !slices.Equal(got, []string{"a", "b"}) || next == nil || clusters([]delivery{*next})[0] != "a" {
		t.Fatalf("first batch %v, next %v; want [a b], then a", got, next)
	}
	batch, next = gather(*next, anns)
	if got := clusters(batch); !slices.Equal(got, []string{"a", "c"}) || next != nil {
		t.Fatalf("second batch %v, next %v; want [a c], then nothing", got, next)
	}
}

// The observer checks no silence while live messages wait that it reads
// late, and does once it has caught up.
func TestBehind(t *testing.T) {
	window := 2 * time.Second
	for _, c := range []struct {
		lag    time.Duration
		queued int
		want   bool
	}{
		{0, 0, false},
		{time.Second, 0, false}, // caught up: nothing waits
		{100 * time.Millisecond, 500, false},
		{time.Second, 1, true},
	} {
		if got := behind(c.lag, c.queued, window); got != c.want {
			t.Errorf("behind(%v, %d, %v) = %v, want %v", c.lag, c.queued, window, got, c.want)
		}
	}
}
