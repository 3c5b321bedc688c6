package recorder

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

var t0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

// ms is t0 plus n milliseconds: the fake clock of these tests.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// memory is a History held in memory, folded by the history's own rules.
type memory map[string]*history.Cluster

func (m memory) Latest(cluster string) (history.Leadership, bool) {
	if c := m[cluster]; c != nil {
		return c.Latest()
	}
	return history.Leadership{}, false
}

func (m memory) Each(f func(name string, c *history.Cluster)) {
	for name, c := range m {
		f(name, c)
	}
}

// rig is a Recorder over a memory, with the timing of the defaults:
// a 200 ms window, a 100 ms grace, and queries after 2 s.
type rig struct {
	t   *testing.T
	mem memory
	r   *Recorder
}

func newRig(t *testing.T) *rig {
	mem := memory{}
	return &rig{t: t, mem: mem, r: New(Config{Window: 200 * time.Millisecond, Grace: 100 * time.Millisecond, AskAfter: 2 * time.Second}, mem)}
}

// apply writes recs to the memory as the store would, and returns the
// records it kept.
func (g *rig) apply(cluster string, recs []history.Record) []history.Record {
	c := g.mem[cluster]
	if c == nil {
		c = &history.Cluster{}
	}
	kept := c.Apply(recs...)
	if len(kept) > 0 {
		g.mem[cluster] = c
	}
	return kept
}

// announce handles an announcement of leader with term, made at the
// announcement's time at and handled at now, from the stream.
func (g *rig) announce(cluster string, leader, term uint64, at, now time.Time) []history.Record {
	a := protocol.Announcement{Cluster: cluster, Leader: leader, Term: term, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: at}}
	return g.apply(cluster, g.r.Announced(cluster, a, now))
}

func (g *rig) heartbeat(cluster string, node, term uint64, at time.Time) []history.Record {
	return g.apply(cluster, g.r.HeardHeartbeat(cluster, node, term, at))
}

func (g *rig) silence(now, listening time.Time) []Write {
	writes := g.r.Silence(now, listening)
	for _, w := range writes {
		g.apply(w.Cluster, w.Records)
	}
	return writes
}

// leadership returns the recorded leadership of cluster with term.
func (g *rig) leadership(cluster string, term uint64) history.Leadership {
	g.t.Helper()
	if c := g.mem[cluster]; c != nil {
		for _, l := range c.Leaderships {
			if l.Term == term {
				return l
			}
		}
	}
	g.t.Fatalf("no leadership of term %d in %s", term, cluster)
	return history.Leadership{}
}

// wantEnd checks how the leadership of term ended.
func (g *rig) wantEnd(cluster string, term uint64, reason history.EndReason, at time.Time) {
	g.t.Helper()
	l := g.leadership(cluster, term)
	if l.EndReason != reason || !l.EndedAt.Equal(at) {
		g.t.Errorf("term %d ended %q at %v, want %q at %v", term, l.EndReason, l.EndedAt, reason, at)
	}
}

// A leader whose heartbeats stop ends silent at its last heartbeat, once
// it has not been heard for longer than the window, and not before.
func TestSilentLeaderEndsAtItsLastHeartbeat(t *testing.T) {
	g := newRig(t)
	listening := ms(-1000)
	g.announce("c", 3, 1, t0, t0)
	for _, at := range []int{50, 100, 150} {
		g.heartbeat("c", 3, 1, ms(at))
	}
	if w := g.silence(ms(350), listening); len(w) != 0 {
		t.Fatalf("Silence a window after the last heartbeat = %+v, want nothing yet", w)
	}
	if l := g.leadership("c", 1); l.Ended() {
		t.Fatalf("term 1 ended within the window: %+v", l)
	}
	w := g.silence(ms(351), listening)
	if len(w) != 1 || w[0].Cluster != "c" || len(w[0].Records) != 1 {
		t.Fatalf("Silence after the window = %+v, want one end for c", w)
	}
	g.wantEnd("c", 1, history.EndSilent, ms(150))
	if w := g.silence(ms(1000), listening); len(w) != 0 {
		t.Errorf("Silence of an ended leadership = %+v, want nothing", w)
	}

	// The next leader starts after a gap that runs from the last
	// heartbeat.
	g.announce("c", 2, 2, ms(400), ms(400))
	c := g.mem["c"]
	if gap, known := c.GapBefore(1); !known || gap != 250*time.Millisecond {
		t.Errorf("gap before term 2 = %v (known %v), want 250ms", gap, known)
	}
}

// The observer cannot tell a leader's silence from its own: while it is
// disconnected nothing ends, and after it reconnects a leader gets a
// whole window from then.
func TestSilenceCountsOnlyWhileListening(t *testing.T) {
	g := newRig(t)
	g.announce("c", 3, 1, t0, t0)
	g.heartbeat("c", 3, 1, ms(10))
	if w := g.silence(ms(5000), time.Time{}); len(w) != 0 {
		t.Fatalf("Silence while disconnected = %+v, want nothing", w)
	}
	reconnected := ms(5000)
	if w := g.silence(ms(5200), reconnected); len(w) != 0 {
		t.Fatalf("Silence a window after reconnecting = %+v, want nothing yet", w)
	}
	g.silence(ms(5201), reconnected)
	// It ends at its last heartbeat all the same: that is the last the
	// observer knows of it.
	g.wantEnd("c", 1, history.EndSilent, ms(10))
}

// A leadership whose leader the observer never heard (announced on the
// stream, before the observer listened) ends unobserved when the
// observer has listened for a window: at the start of listening, or at
// its start if that is later.
func TestSilenceOfALeaderNeverHeard(t *testing.T) {
	g := newRig(t)
	g.announce("early", 3, 1, ms(-5000), t0)
	g.announce("late", 3, 1, ms(100), ms(100))
	if w := g.silence(ms(200), t0); len(w) != 0 {
		t.Fatalf("Silence a window after listening began = %+v, want nothing yet", w)
	}
	w := g.silence(ms(201), t0)
	if len(w) != 2 || w[0].Cluster != "early" || w[1].Cluster != "late" {
		t.Fatalf("Silence = %+v, want the ends of early and late, in order", w)
	}
	g.wantEnd("early", 1, history.EndUnobserved, t0)
	// "late" started at 100 ms, after listening began: its end is
	// clamped to its start.
	g.wantEnd("late", 1, history.EndUnobserved, ms(100))
	if _, known := g.mem["late"].GapBefore(1); known {
		t.Error("a gap is known after an unobserved end")
	}
}

// A leader ended by silence that is heard again with its term resumes its
// leadership; one heard with another term does not.
func TestSilentLeaderHeardAgainResumes(t *testing.T) {
	g := newRig(t)
	g.announce("c", 3, 1, t0, t0)
	g.heartbeat("c", 3, 1, ms(50))
	g.silence(ms(300), ms(-1000))
	g.wantEnd("c", 1, history.EndSilent, ms(50))

	if kept := g.heartbeat("c", 3, 7, ms(400)); len(kept) != 0 {
		t.Errorf("a heartbeat with another term recorded %+v", kept)
	}
	kept := g.heartbeat("c", 3, 1, ms(410))
	if len(kept) != 1 || kept[0].Kind != history.KindResume {
		t.Fatalf("heard again: recorded %+v, want a resume", kept)
	}
	if l := g.leadership("c", 1); l.Ended() {
		t.Errorf("term 1 still ended after its leader was heard: %+v", l)
	}
}

// When a successor is announced: a leader heard within the grace before
// was superseded while working (no gap); one heard longer ago had stopped
// and ends silent at its last heartbeat; one never heard ends unobserved
// (no known gap).
func TestEndBeforeSuccessor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat int // ms, <0: none
		next      int // ms, the successor's announcement
		reason    history.EndReason
		endedAt   time.Time
	}{
		{"heard within the grace", 100, 150, history.EndSuperseded, ms(150)},
		{"heard just at the grace", 50, 150, history.EndSuperseded, ms(150)},
		{"silent for longer than the grace", 49, 150, history.EndSilent, ms(49)},
		{"silent for longer than the window", 10, 900, history.EndSilent, ms(10)},
		{"never heard", -1, 150, history.EndUnobserved, ms(150)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			g.announce("c", 5, 5, t0, t0)
			if tc.heartbeat >= 0 {
				g.heartbeat("c", 5, 5, ms(tc.heartbeat))
			}
			g.announce("c", 4, 9, ms(tc.next), ms(tc.next))
			g.t = t
			g.wantEnd("c", 5, tc.reason, tc.endedAt)
		})
	}
}

// The observer's own check of TestSilentLeaderBeforeItsSuccessor, without
// NATS: 5 stops, 4 takes over 150 ms later (beyond the grace), 5 comes
// back 50 ms after 4's last heartbeat.
func TestSilentLeaderBeforeItsSuccessor(t *testing.T) {
	g := newRig(t)
	g.announce("c", 5, 5, t0, t0)
	g.r.HeardAnnouncement("c", 5, 5, t0)
	g.heartbeat("c", 5, 5, t0)
	g.announce("c", 4, 9, ms(150), ms(150))
	g.r.HeardAnnouncement("c", 4, 9, ms(150))
	g.heartbeat("c", 4, 9, ms(200))
	g.announce("c", 5, 10, ms(250), ms(250))

	g.wantEnd("c", 5, history.EndSilent, t0)
	g.wantEnd("c", 9, history.EndSuperseded, ms(250))
	c := g.mem["c"]
	for i, want := range []time.Duration{150 * time.Millisecond, 0} {
		if gap, known := c.GapBefore(i + 1); !known || gap != want {
			t.Errorf("gap before term %d = %v (known %v), want %v", c.Leaderships[i+1].Term, gap, known, want)
		}
	}
}

// A resign ends the current leadership at the resign; one from a node
// that does not lead changes nothing.
func TestResign(t *testing.T) {
	g := newRig(t)
	g.announce("c", 1, 1, t0, t0)
	if recs := g.r.Resigned("c", 2, ms(500)); len(recs) != 0 {
		t.Errorf("resign of a follower = %+v, want nothing", recs)
	}
	g.apply("c", g.r.Resigned("c", 1, ms(1000)))
	g.wantEnd("c", 1, history.EndResign, ms(1000))
	g.announce("c", 2, 2, ms(1500), ms(1500))
	if gap, known := g.mem["c"].GapBefore(1); !known || gap != 500*time.Millisecond {
		t.Errorf("gap after the resign = %v (known %v), want 500ms", gap, known)
	}
	// The resigned leader no longer acts: the new leader's heartbeat is
	// no split brain with it.
	if kept := g.heartbeat("c", 2, 2, ms(1550)); len(kept) != 0 {
		t.Errorf("the new leader's heartbeat after a resign recorded %+v", kept)
	}
	if w := g.silence(ms(1600), ms(-1000)); len(w) != 0 {
		t.Errorf("Silence = %+v, want nothing: term 2 was heard within its window", w)
	}
}

// The split-brain rules as records: two nodes with one term at once, and
// a superseded leader still heard after the grace, each pair once.
func TestSplitBrainRecords(t *testing.T) {
	g := newRig(t)
	g.announce("c", 2, 2, t0, t0)
	if kept := g.apply("c", g.r.HeardAnnouncement("c", 2, 2, t0)); len(kept) != 0 {
		t.Fatalf("one leader: recorded %+v", kept)
	}
	g.announce("c", 3, 4, ms(10), ms(10))
	g.apply("c", g.r.HeardAnnouncement("c", 3, 4, ms(10)))
	if kept := g.heartbeat("c", 2, 2, ms(60)); len(kept) != 0 {
		t.Errorf("heartbeat in flight within the grace: recorded %+v", kept)
	}
	kept := g.heartbeat("c", 2, 2, ms(120))
	if len(kept) != 1 || kept[0].Kind != history.KindSplit || kept[0].Reason != history.SplitStaleLeader {
		t.Fatalf("stale leader after the grace: recorded %+v, want one stale_leader split", kept)
	}
	if want := []history.Acting{{Leader: 2, Term: 2}, {Leader: 3, Term: 4}}; !slices.Equal(kept[0].Leaders, want) {
		t.Errorf("split leaders = %+v, want %+v (lower term first)", kept[0].Leaders, want)
	}
	if kept := g.heartbeat("c", 2, 2, ms(150)); len(kept) != 0 {
		t.Errorf("the same stale pair again: recorded %+v", kept)
	}

	g.announce("c", 4, 6, ms(200), ms(200))
	g.apply("c", g.r.HeardAnnouncement("c", 4, 6, ms(200)))
	g.announce("c", 5, 6, ms(200), ms(201))
	kept = g.apply("c", g.r.HeardAnnouncement("c", 5, 6, ms(201)))
	if len(kept) != 1 || kept[0].Reason != history.SplitSameTerm {
		t.Fatalf("two leaders of term 6: recorded %+v, want one same_term split", kept)
	}
	if c := g.mem["c"]; len(c.Leaderships) != 3 || len(c.SplitBrains) != 2 {
		t.Errorf("history = %d leaderships, %d split brains; want 3 and 2", len(c.Leaderships), len(c.SplitBrains))
	}
}

// A term heard in heartbeats but not recorded is missing after AskAfter:
// its cluster is named once, and no longer once the term is recorded.
func TestMissingTermIsAskedOnce(t *testing.T) {
	g := newRig(t)
	g.announce("b", 1, 1, t0, t0)
	g.heartbeat("b", 2, 3, ms(10))
	g.heartbeat("a", 7, 1, ms(20))
	g.heartbeat("b", 1, 1, ms(30)) // recorded: not missing
	if ask := g.r.Missing(ms(2009)); len(ask) != 0 {
		t.Errorf("Missing before AskAfter = %v, want none", ask)
	}
	if ask := g.r.Missing(ms(2020)); !slices.Equal(ask, []string{"a", "b"}) {
		t.Errorf("Missing after AskAfter = %v, want [a b] in order", ask)
	}
	if ask := g.r.Missing(ms(5000)); len(ask) != 0 {
		t.Errorf("Missing again = %v, want none: each term is asked once", ask)
	}

	// The answer is recorded; a stale answer is not.
	answer := protocol.Announcement{Cluster: "b", Leader: 2, Term: 3, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: ms(5)}}
	if kept := g.apply("b", g.r.Answered("b", answer, ms(5001))); len(kept) != 2 {
		t.Fatalf("answer recorded %+v, want the end of term 1 and term 3", kept)
	}
	if recs := g.r.Answered("b", answer, ms(5002)); recs != nil {
		t.Errorf("an answer for a recorded term gives %+v, want nothing", recs)
	}
	old := answer
	old.Term = 2
	if recs := g.r.Answered("b", old, ms(5003)); recs != nil {
		t.Errorf("an answer for an older term gives %+v, want nothing", recs)
	}
	// A newer term heard later is missing anew.
	g.heartbeat("b", 4, 8, ms(6000))
	if ask := g.r.Missing(ms(8000)); !slices.Equal(ask, []string{"b"}) {
		t.Errorf("Missing for a newer term = %v, want [b]", ask)
	}
}

// A leader that moves on to a newer term of its own (a Paxos leader that
// proposes a higher ballot when a higher node comes back) is still
// working: it is not silent at its older term, and when its next term is
// announced its earlier leadership ends superseded, with no gap, not
// unobserved.
func TestLeaderThatMovesToANewerTermIsSuperseded(t *testing.T) {
	g := newRig(t)
	g.announce("c", 4, 109, t0, t0)
	g.heartbeat("c", 4, 109, ms(50))
	g.heartbeat("c", 4, 139, ms(100)) // its proposal for the newer term
	if w := g.silence(ms(140), ms(-1000)); len(w) != 0 {
		t.Errorf("Silence of a leader heard at a newer term = %+v, want nothing", w)
	}
	g.announce("c", 4, 139, ms(120), ms(150))
	g.wantEnd("c", 109, history.EndSuperseded, ms(120))
	if gap, known := g.mem["c"].GapBefore(1); !known || gap != 0 {
		t.Errorf("gap before term 139 = %v (known %v), want 0", gap, known)
	}
}

// The silence check runs each half window over every cluster with a
// current leadership: with thousands of idle clusters, it must stay far
// below the window.
func BenchmarkSilence10000(b *testing.B) {
	mem := memory{}
	r := New(Config{Window: 200 * time.Millisecond, Grace: 100 * time.Millisecond, AskAfter: 2 * time.Second}, mem)
	for i := range 10000 {
		name := fmt.Sprintf("shard-%d", i)
		mem[name] = &history.Cluster{}
		mem[name].Apply(history.Record{Kind: history.KindLeader, Term: 1, Leader: uint64(i%5 + 1), At: protocol.Timestamp{Time: t0}})
		r.HeardHeartbeat(name, uint64(i%5+1), 1, t0)
	}
	b.ResetTimer()
	for b.Loop() {
		if w := r.Silence(t0.Add(100*time.Millisecond), t0); len(w) != 0 {
			b.Fatalf("%d silent", len(w))
		}
	}
}
