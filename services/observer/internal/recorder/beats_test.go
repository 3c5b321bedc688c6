package recorder

import (
	"fmt"
	"testing"

	"github.com/baton-election/baton/services/observer/internal/history"
)

// In a deployment of several elections per process, a leader counts as
// heard while its process beats: its leadership ends silent only once
// both its heartbeats and its beats stop, at the later. A beat of the
// same member of another deployment does not count, nor one before the
// recorder learnt the cluster's deployment.
func TestSilenceCountsBeats(t *testing.T) {
	g := newRig(t)
	g.announce("shard-1", 3, 1, t0, t0)
	g.announce("other", 3, 1, t0, t0)
	g.heartbeat("shard-1", 3, 1, ms(10))
	g.heartbeat("other", 3, 1, ms(10))
	g.r.HeardBeat("shard-0", 3, ms(150)) // before Via: not counted
	g.r.Via("shard-1", "shard-0")
	g.r.Via("other", "elsewhere")
	for at := 100; at <= 1000; at += 100 {
		g.r.HeardBeat("shard-0", 3, ms(at))
		g.r.HeardBeat("shard-0", 2, ms(at+50))
		g.r.HeardBeat("elsewhere", 2, ms(at+50))
	}
	w := g.silence(ms(1100), t0)
	if len(w) != 1 || w[0].Cluster != "other" {
		t.Fatalf("Silence at 1.1 s = %+v, want the end of other alone", w)
	}
	g.wantEnd("other", 1, history.EndSilent, ms(10))
	if w := g.silence(ms(1200), t0); len(w) != 0 {
		t.Fatalf("Silence a window after the last beat = %+v, want nothing", w)
	}
	g.silence(ms(1201), t0)
	g.wantEnd("shard-1", 1, history.EndSilent, ms(1000))
}

// The members followed by their beats are bounded.
func TestBeatsBounded(t *testing.T) {
	g := newRig(t)
	for m := range uint64(maxBeats + 10) {
		g.r.HeardBeat("d", m+1, t0)
	}
	if n := len(g.r.beats); n != maxBeats {
		t.Errorf("%d beats followed, at most %d", n, maxBeats)
	}
	for i := range maxBeats + 10 {
		g.r.Via(fmt.Sprintf("c-%d", i), "d")
	}
	if n := len(g.r.via); n != maxBeats {
		t.Errorf("%d clusters noted, at most %d", n, maxBeats)
	}
}
