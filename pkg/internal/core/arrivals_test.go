package core

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestArrivalsBound(t *testing.T) {
	tests := []struct {
		name string
		gaps []int
		want int
	}{
		{"too few to say", []int{10, 10, 10, 10, 10, 10, 10}, 0},
		{"regular", []int{10, 10, 10, 10, 10, 10, 10, 10}, 11},
		// Mean 10, σ 5: 10 + 4·5 = 30, and a tick.
		{"spread", []int{5, 15, 5, 15, 5, 15, 5, 15}, 31},
		{"a gap beyond the bound counts as maxGap", []int{1 << 40, 0, 0, 0, 0, 0, 0, 0}, int((maxGap+4*isqrtCeil(7*maxGap*maxGap)+7)/8) + 1},
	}
	for _, tt := range tests {
		var a Arrivals
		for _, g := range tt.gaps {
			a.Add(g)
		}
		if got := a.Bound(); got != tt.want {
			t.Errorf("%s: Bound() = %d, want %d", tt.name, got, tt.want)
		}
	}
	var a Arrivals
	for range 100 {
		a.Add(50)
	}
	for range arrivalWindow {
		a.Add(10)
	}
	if got := a.Bound(); got != 11 {
		t.Errorf("after a window of regular gaps: Bound() = %d, want 11 (older gaps forgotten)", got)
	}
	a.Reset()
	if got := a.Bound(); got != 0 {
		t.Errorf("after Reset: Bound() = %d, want 0", got)
	}
}

// follow makes c a follower of leader 9 in term 3 whose heartbeats
// arrived at the given gaps.
func follow(c *Core, gaps ...int) {
	c.Claimed(9, 9, 3, true)
	for _, g := range gaps {
		for range g {
			c.Tick()
		}
		c.Claimed(9, 9, 3, true)
	}
	c.Ready()
}

// silence ticks c until it times out its leader, at most limit ticks, and
// returns the tick it did (0 if it did not) and what it sent.
func silence(c *Core, limit int) (at int, sent []protocol.Message) {
	for i := 1; i <= limit; i++ {
		timedOut := c.Tick()
		sent = append(sent, c.Ready().Messages...)
		if timedOut {
			return i, sent
		}
	}
	return 0, sent
}

// The leader time-out follows the arrivals: the configured one while
// heartbeats come on time, longer when they spread, never above its
// bound.
func TestLeaderTimeoutFollowsArrivals(t *testing.T) {
	base := election.DefaultLeaderTimeoutTicks
	hb := election.DefaultHeartbeatTicks

	quiet := newTestCore(t, 4)
	follow(quiet, slices.Repeat([]int{hb}, 20)...)
	if at, _ := silence(quiet, 10*base); at != base {
		t.Errorf("regular heartbeats: timed out after %d ticks, want %d", at, base)
	}

	busy := newTestCore(t, 4)
	follow(busy, slices.Repeat([]int{hb - 5, hb + 5}, 10)...)
	want := 31 // mean 10, σ 5: 10 + 4·5 + 1
	if at, _ := silence(busy, 10*base); at != want {
		t.Errorf("spread heartbeats: timed out after %d ticks, want %d", at, want)
	}

	wild := newTestCore(t, 4)
	// Gaps that spread further as the time-out grows with them.
	follow(wild, append(slices.Repeat([]int{1, base - 1}, 10), slices.Repeat([]int{1, 2*base + 5}, 16)...)...)
	if at, _ := silence(wild, 10*base); at != maxTimeoutFactor*base {
		t.Errorf("wild heartbeats: timed out after %d ticks, want the bound %d", at, maxTimeoutFactor*base)
	}

	// Another leader: what was learnt of the last one is forgotten.
	busy.Claimed(9, 9, 3, true) // follows again after the time-out
	busy.Ready()
	if at, _ := silence(busy, 10*base); at != base {
		t.Errorf("a new leadership: timed out after %d ticks, want %d", at, base)
	}
}

// A follower asks a silent leader T before the time-out; the leader
// answers with a heartbeat, which ends the silence: nobody is suspected.
func TestProbeBeforeSuspicion(t *testing.T) {
	base := election.DefaultLeaderTimeoutTicks
	T := election.DefaultAnswerTicks
	f := newTestCore(t, 4)
	follow(f, 10)
	for range base - T - 1 {
		if f.Tick() || len(f.Ready().Messages) != 0 {
			t.Fatalf("the follower acted before the probe was due")
		}
	}
	f.Tick()
	rd := f.Ready()
	if len(rd.Messages) != 1 || rd.Messages[0].Type != protocol.TypeProbe || rd.Messages[0].To != 9 || rd.Messages[0].Term != 3 {
		t.Fatalf("at %d ticks of silence: sent %v, want one probe to 9 in term 3", base-T, rd.Messages)
	}
	if !slices.Equal(rd.Events, []election.Event{{Kind: election.LeaderProbed, Leader: 9, Term: 3}}) {
		t.Errorf("events %v, want the probe's", rd.Events)
	}

	// The leader answers.
	l := newTestCore(t, 9)
	l.BecomeCandidate(true)
	l.maxTerm = 2
	if term := l.Claim(); term != 3 {
		t.Fatalf("leader claimed %d, want 3", term)
	}
	l.Tick()
	l.Ready()
	if !l.AnswerProbe() {
		t.Fatal("the leader did not answer the probe")
	}
	if l.AnswerProbe() {
		t.Error("the leader answered twice in one tick")
	}
	hb := l.Ready().Messages
	if len(hb) != 1 || hb[0].Type != protocol.TypeHeartbeat || hb[0].To != 0 || hb[0].Term != 3 {
		t.Fatalf("answer %v, want one heartbeat broadcast in term 3", hb)
	}
	if f.AnswerProbe() {
		t.Error("a follower answered a probe")
	}

	f.Tick()
	f.Claimed(9, 9, 3, true)
	rd = f.Ready()
	if !slices.Equal(rd.Events, []election.Event{{Kind: election.ProbeAnswered, Leader: 9, Term: 3}}) {
		t.Errorf("answer heard: events %v, want the probe answered", rd.Events)
	}
	if at, sent := silence(f, base); at != base || len(sent) != 1 {
		t.Errorf("after the answer: timed out after %d ticks with %v sent, want %d ticks and one probe", at, sent, base)
	}

	// No answer: the time-out comes when it would have without the probe.
	g := newTestCore(t, 4)
	follow(g, 10)
	if at, sent := silence(g, 2*base); at != base || len(sent) != 1 || sent[0].Type != protocol.TypeProbe {
		t.Errorf("no answer: timed out after %d ticks with %v sent, want %d ticks and one probe", at, sent, base)
	}
}

// A leader heard in a message that arrived later than the ticks given so
// far (a driver settling at a deadline hands it over before the ticks
// that fell due before it arrived) is silent from the message's arrival:
// those ticks do not count against it.
func TestSilenceFromArrival(t *testing.T) {
	base := election.DefaultLeaderTimeoutTicks
	c := newTestCore(t, 4)
	follow(c, 10)
	const late = 15
	c.Arrived(int(c.now) + late)
	c.Claimed(9, 9, 3, true)
	c.Done()
	c.Ready()
	if at, _ := silence(c, 2*base); at != late+base {
		t.Errorf("heard %d ticks ahead of the machine: timed out after %d ticks, want %d", late, at, late+base)
	}
	c.Arrived(int(c.now) - 5) // an arrival before the current tick counts from it
	c.Claimed(9, 9, 3, true)
	c.Done()
	c.Ready()
	if at, _ := silence(c, 2*base); at != base {
		t.Errorf("heard in an earlier tick: timed out after %d ticks, want %d", at, base)
	}
}
