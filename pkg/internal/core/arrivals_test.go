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
		{"too few for the spread: the peak alone, and half of it", []int{10, 10, 10, 10, 10, 10, 10}, 15},
		{"regular: the peak", []int{10, 10, 10, 10, 10, 10, 10, 10}, 15},
		// Mean 10, σ 5: 10 + 4·5 = 30, and a tick, above 1.5 peaks (22).
		{"spread", []int{5, 15, 5, 15, 5, 15, 5, 15}, 31},
		{"a gap beyond the bound counts as maxGap", []int{1 << 40, 0, 0, 0, 0, 0, 0, 0}, maxGap + maxGap/2},
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
	// The spread forgot the long gaps; the peak stays, 320 ticks of
	// shorter arrivals being less than peakDecay: 50, and half of it.
	if got := a.Bound(); got != 75 {
		t.Errorf("after a window of regular gaps: Bound() = %d, want 75 (the spread forgot, the peak stays)", got)
	}
	a.Reset()
	if got := a.Bound(); got != 75 {
		t.Errorf("after Reset: Bound() = %d, want 75 (the peak stays)", got)
	}
	for range 2 * peakDecay / 10 {
		a.Add(10)
	}
	// 320 + 1,280 ticks: two steps, a tick each.
	if got := a.Bound(); got != 72 {
		t.Errorf("after 1,600 ticks of shorter arrivals: Bound() = %d, want 72 (48, and half of it)", got)
	}
	for range peakDecay * (48 - 10) / 10 {
		a.Add(10)
	}
	if got := a.Bound(); got != 15 {
		t.Errorf("after the peak decayed: Bound() = %d, want 15", got)
	}
}

// A host that stalls now and then: the stall raises the time-out for the
// minutes after it, long after the window of gaps forgot it, so that the
// next stall of the same length finds the follower waiting; on a quiet
// host the time-out returns to the configured one.
func TestArrivalsRememberStalls(t *testing.T) {
	base := election.DefaultLeaderTimeoutTicks
	hb := election.DefaultHeartbeatTicks
	var a Arrivals
	for range 100 {
		a.Add(hb)
	}
	if got := a.Limit(base); got != base {
		t.Fatalf("quiet: Limit = %d, want %d", got, base)
	}
	const stall = 100 // a second
	a.Add(stall)
	for range 600 { // a minute of heartbeats on time
		a.Add(hb)
	}
	if got := a.Limit(base); got <= stall {
		t.Errorf("a minute after a stall of %d ticks: Limit = %d, want above it", stall, got)
	}
	for range 6000 { // ten minutes
		a.Add(hb)
	}
	if got := a.Limit(base); got != base {
		t.Errorf("ten minutes later: Limit = %d, want %d", got, base)
	}
	a.Add(1 << 20)
	if got := a.Limit(base); got != election.MaxAdaptiveTimeoutFactor*base {
		t.Errorf("after a gap beyond every bound: Limit = %d, want the bound %d", got, election.MaxAdaptiveTimeoutFactor*base)
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

	bound := election.MaxAdaptiveTimeoutFactor * base
	wild := newTestCore(t, 4)
	// Gaps that spread further as the time-out grows with them; Arrivals'
	// test checks the bound.
	follow(wild, append(slices.Repeat([]int{1, base - 1}, 10), slices.Repeat([]int{1, 2*base + 5}, 16)...)...)
	if limit, at := wild.Limit(), 0; limit <= 2*base+5 || limit > bound {
		t.Errorf("wild heartbeats: limit %d, want above the longest gap %d and at most %d", limit, 2*base+5, bound)
	} else if at, _ = silence(wild, 2*bound); at != limit {
		t.Errorf("wild heartbeats: timed out after %d ticks, want %d", at, limit)
	}

	// Another leader: the spread of the last one is forgotten, its
	// peak (15 ticks, the host's) is not.
	busy.Claimed(9, 9, 3, true) // follows again after the time-out
	busy.Ready()
	if at, _ := silence(busy, 10*base); at != 15+15/2 {
		t.Errorf("a new leadership: timed out after %d ticks, want %d", at, 15+15/2)
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
	// The answer came after 16 ticks of silence: the peak.
	if at, sent := silence(f, 2*base); at != 16+16/2 || len(sent) != 1 {
		t.Errorf("after the answer: timed out after %d ticks with %v sent, want %d ticks and one probe", at, sent, 16+16/2)
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
	limit := c.Limit()
	if at, _ := silence(c, 4*base); at != late+limit {
		t.Errorf("heard %d ticks ahead of the machine: timed out after %d ticks, want %d", late, at, late+limit)
	}
	c.Arrived(int(c.now) - 5) // an arrival before the current tick counts from it
	c.Claimed(9, 9, 3, true)
	c.Done()
	c.Ready()
	limit = c.Limit()
	if at, _ := silence(c, 4*base); at != limit {
		t.Errorf("heard in an earlier tick: timed out after %d ticks, want %d", at, limit)
	}
}

// Heard measures each gap from the same leader's last message, also
// across a silence that fired the time-out; another leader's message,
// Forget, or a gap beyond the bound start the gaps again.
func TestArrivalsHeard(t *testing.T) {
	const base = 20
	var a Arrivals
	at := 0
	for range 10 {
		at += 5
		a.Heard(9, at, base)
	}
	at += 3 * base // a silence, then the same leader again
	a.Heard(9, at, base)
	if got := a.Limit(base); got < 3*base+3*base/2 {
		t.Errorf("the same leader after a %d-tick silence: Limit = %d, want at least 1.5 × it", 3*base, got)
	}
	for _, tc := range []struct {
		name string
		next func(a *Arrivals, at int) int
	}{
		{"another leader in between", func(a *Arrivals, at int) int { a.Heard(8, at+1, base); return at + 1 }},
		{"Forget of the leader", func(a *Arrivals, at int) int { a.Forget(9); return at }},
		{"Forget of whoever", func(a *Arrivals, at int) int { a.Forget(0); return at }},
		{"beyond the bound", func(a *Arrivals, at int) int { return at + 2*election.MaxAdaptiveTimeoutFactor*base }},
	} {
		var a Arrivals
		a.Heard(9, 0, base)
		at := tc.next(&a, 0) + 3*base
		a.Heard(9, at, base)
		if got := a.Limit(base); got != base {
			t.Errorf("%s: Limit = %d, want %d", tc.name, got, base)
		}
	}
	var b Arrivals
	b.Heard(9, 0, base)
	b.Forget(8) // another leader's departure
	b.Heard(9, 3*base, base)
	if got := b.Limit(base); got < 3*base+3*base/2 {
		t.Errorf("after Forget of another leader: Limit = %d, want at least 1.5 × the silence", got)
	}
}
