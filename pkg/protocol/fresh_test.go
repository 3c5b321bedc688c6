package protocol

import (
	"math"
	"testing"
	"time"
)

func TestReplayGuard(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	msg := func(from, inc, n uint64, sent time.Time) Message {
		return Message{V: Version, Type: TypeHeartbeat, From: from, Term: 5, Inc: inc, N: n, TS: sent.UnixMilli()}
	}
	type step struct {
		name string
		m    Message
		want Reason // "" means accepted
	}
	steps := []step{
		{"first message of a sender", msg(1, 10, 5, now), ""},
		{"the same message again", msg(1, 10, 5, now), ReasonReplayed},
		{"the next number", msg(1, 10, 6, now), ""},
		{"an earlier number than the first one heard (the floor)", msg(1, 10, 3, now), ReasonReplayed},
		{"an earlier number not yet seen, after the floor (overtaken)", msg(1, 10, 5, now), ReasonReplayed},
		{"the number after next", msg(1, 10, 8, now), ""},
		{"the one it overtook", msg(1, 10, 7, now), ""},
		{"that one again", msg(1, 10, 7, now), ReasonReplayed},
		{"a jump ahead", msg(1, 10, 300, now), ""},
		{"what came before the jump, still in the window", msg(1, 10, 100, now), ""},
		{"a number before the window", msg(1, 10, 300-ReplayWindow, now), ReasonReplayed},
		{"an earlier incarnation", msg(1, 9, 1000, now), ReasonReplayed},
		{"another sender has its own numbers", msg(2, 10, 5, now), ""},
		{"a new incarnation restarts the numbers", msg(1, 11, 1, now), ""},
		{"the old incarnation is now refused", msg(1, 10, 301, now), ReasonReplayed},
		{"sent too long ago", msg(1, 11, 2, now.Add(-3*time.Second)), ReasonExpired},
		{"dated too far in the future", msg(1, 11, 3, now.Add(3*time.Second)), ReasonExpired},
		{"within the bound either way", msg(1, 11, 4, now.Add(1500*time.Millisecond)), ""},
		{"no freshness fields", Message{V: Version, Type: TypeHeartbeat, From: 1, Term: 5}, ReasonInvalidField},
	}
	g := NewReplayGuard(2 * time.Second)
	for _, s := range steps {
		err := g.Check(s.m, now)
		switch {
		case s.want == "" && err != nil:
			t.Errorf("%s: got %v, want accepted", s.name, err)
		case s.want != "" && (err == nil || ReasonOf(err) != s.want):
			t.Errorf("%s: got %v, want reason %s", s.name, err, s.want)
		}
	}
}

// Every number of a window is accepted once, whatever the order of arrival
// within the window.
func TestReplayGuardEveryNumberOnce(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := NewReplayGuard(time.Second)
	order := []uint64{}
	for n := uint64(1); n <= 600; n++ {
		order = append(order, n)
	}
	// Swap neighbours within blocks of 7 so that messages overtake (after
	// the first, the floor).
	for i := 1; i+6 < len(order); i += 7 {
		order[i], order[i+6] = order[i+6], order[i]
		order[i+2], order[i+4] = order[i+4], order[i+2]
	}
	if err := g.Check(Message{V: Version, Type: TypeAck, From: 3, Inc: 1, N: 1, TS: now.UnixMilli()}, now); err != nil {
		t.Fatal(err)
	}
	for _, n := range order[1:] {
		m := Message{V: Version, Type: TypeAck, From: 3, Inc: 1, N: n, TS: now.UnixMilli()}
		if err := g.Check(m, now); err != nil {
			t.Fatalf("number %d: first arrival refused: %v", n, err)
		}
		if err := g.Check(m, now); ReasonOf(err) != ReasonReplayed {
			t.Fatalf("number %d: second arrival got %v, want %s", n, err, ReasonReplayed)
		}
	}
}

func TestStamp(t *testing.T) {
	s := NewStamp(42)
	now := time.UnixMilli(1_700_000_000_123)
	var a, b Message
	s.Apply(&a, now)
	s.Apply(&b, now.Add(time.Millisecond))
	if a.Inc != 42 || a.N != 1 || a.TS != 1_700_000_000_123 || b.N != 2 || b.TS != 1_700_000_000_124 {
		t.Errorf("got %+v and %+v, want numbers 1 and 2 of incarnation 42 with their times", a, b)
	}
}

// A point-to-point message names the receiver's incarnation: a copy
// captured before the receiver restarted is refused by its new one, as is
// one that names no incarnation and was sent before the receiver started.
func TestCheckAddressee(t *testing.T) {
	started := time.UnixMilli(1_700_000_000_000)
	own, before := uint64(started.UnixNano()), uint64(started.Add(-time.Hour).UnixNano())
	sentBefore, sentSince := started.Add(-time.Millisecond).UnixMilli(), started.Add(time.Millisecond).UnixMilli()
	for _, tc := range []struct {
		name string
		m    Message
		want bool
	}{
		{"for this incarnation", Message{Type: TypeAck, From: 1, To: 2, ToInc: own, TS: sentBefore}, true},
		{"the sender knew no incarnation yet, sent since", Message{Type: TypeAck, From: 1, To: 2, TS: sentSince}, true},
		{"the sender knew no incarnation, sent before the start", Message{Type: TypeAck, From: 1, To: 2, TS: sentBefore}, false},
		{"captured before the restart", Message{Type: TypeAck, From: 1, To: 2, ToInc: before, TS: sentBefore}, false},
		{"sent since, before the sender heard of the restart", Message{Type: TypeAck, From: 1, To: 2, ToInc: before, TS: sentSince}, true},
		{"broadcasts name nobody", Message{Type: TypeHeartbeat, From: 1, TS: sentBefore}, true},
	} {
		err := CheckAddressee(tc.m, own, started)
		if (err == nil) != tc.want || (err != nil && ReasonOf(err) != ReasonReplayed) {
			t.Errorf("%s: CheckAddressee = %v, want accepted: %v", tc.name, err, tc.want)
		}
	}
	g := NewReplayGuard(time.Second)
	now := time.UnixMilli(1_700_000_000_000)
	if g.Incarnation(3) != 0 {
		t.Errorf("Incarnation of an unknown sender: got %d, want 0", g.Incarnation(3))
	}
	g.Check(Message{Type: TypeAck, From: 3, Inc: 9, N: 1, TS: now.UnixMilli()}, now)
	if got := g.Incarnation(3); got != 9 {
		t.Errorf("Incarnation: got %d, want 9", got)
	}
}

// A member's incarnation far ahead of the receiver's clock is refused, not
// adopted: adopted, it would drop every later incarnation of that member
// as a replay, until the receiver restarts.
func TestReplayGuardFarFutureIncarnation(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := NewReplayGuard(2 * time.Second)
	inc := uint64(now.Add(-time.Minute).UnixNano())
	m := Message{V: Version, Type: TypeHeartbeat, From: 1, Term: 5, Inc: inc, N: 1, TS: now.UnixMilli()}
	if err := g.Check(m, now); err != nil {
		t.Fatalf("an incarnation started a minute ago: %v", err)
	}
	for _, far := range []uint64{1<<64 - 1, uint64(now.Add(time.Hour).UnixNano())} {
		lie := m
		lie.Inc, lie.N = far, 2
		if err := g.Check(lie, now); ReasonOf(err) != ReasonInvalidField {
			t.Errorf("incarnation %d: got %v, want reason %s", far, err, ReasonInvalidField)
		}
	}
	if got := g.Incarnation(1); got != inc {
		t.Errorf("incarnation kept: got %d, want %d", got, inc)
	}
	next := m
	next.N = 3
	if err := g.Check(next, now); err != nil {
		t.Errorf("the member's own next message after the lies: %v", err)
	}
	near := m
	near.Inc, near.N = uint64(now.Add(3*time.Second).UnixNano()), 1 // a clock ahead within the bound
	if err := g.Check(near, now); err != nil {
		t.Errorf("an incarnation 3 s ahead (clocks apart within twice MaxAge): %v", err)
	}
}

// A node restarted without its data on a host whose clock is behind the
// old process's start has a lower incarnation: it is refused while the old
// one may still be heard (a replay of the old process's messages cannot
// be told from it), and accepted once the old one has been silent for
// twice MaxAge, for good.
func TestReplayGuardLowerIncarnationAfterSilence(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	maxAge := 2 * time.Second
	g := NewReplayGuard(maxAge)
	msg := func(inc, n uint64, at time.Time) Message {
		return Message{V: Version, Type: TypeHeartbeat, From: 1, Term: 5, Inc: inc, N: n, TS: at.UnixMilli()}
	}
	old := uint64(start.UnixNano())
	if err := g.Check(msg(old, 1, start), start); err != nil {
		t.Fatal(err)
	}
	lower := old - uint64(time.Second)
	soon := start.Add(maxAge)
	if err := g.Check(msg(lower, 1, soon), soon); ReasonOf(err) != ReasonReplayed {
		t.Errorf("lower incarnation while the old one was heard within twice MaxAge: got %v, want %s", err, ReasonReplayed)
	}
	later := start.Add(2*maxAge + time.Millisecond)
	if err := g.Check(msg(lower, 2, later), later); err != nil {
		t.Fatalf("lower incarnation after the old one fell silent: %v", err)
	}
	if got := g.Incarnation(1); got != lower {
		t.Errorf("incarnation now: got %d, want %d", got, lower)
	}
	if err := g.Check(msg(lower, 3, later), later); err != nil {
		t.Errorf("its next message: %v", err)
	}
	if err := g.Check(msg(lower, 2, later), later); ReasonOf(err) != ReasonReplayed {
		t.Errorf("a copy of its message: got %v, want %s", err, ReasonReplayed)
	}
}

// A timestamp centuries ahead is not fresh: the age of a message dated
// beyond what a time.Duration holds must not wrap round to pass the check.
func TestReplayGuardFarFutureTimestamp(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := NewReplayGuard(2 * time.Second)
	inc := uint64(now.Add(-time.Minute).UnixNano())
	for i, ts := range []int64{math.MaxInt64, now.UnixMilli() + 292*365*24*3600*1000, now.UnixMilli() + 3000, 1} {
		m := Message{V: Version, Type: TypeHeartbeat, From: 1, Term: 5, Inc: inc, N: uint64(i + 1), TS: ts}
		if err := g.Check(m, now); ReasonOf(err) != ReasonExpired {
			t.Errorf("timestamp %d (now %d): got %v, want reason %s", ts, now.UnixMilli(), err, ReasonExpired)
		}
	}
}

// A message numbered far ahead of its sender's own (forged, where messages
// are not signed) mutes the sender only until everything accepted of it
// has expired: then the sender's next message is a new floor. Copies of
// what was accepted are refused all along.
func TestReplayGuardNumberFarAheadExpires(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	maxAge := 2 * time.Second
	g := NewReplayGuard(maxAge)
	inc := uint64(start.Add(-time.Minute).UnixNano())
	msg := func(n uint64, at time.Time) Message {
		return Message{V: Version, Type: TypeHeartbeat, From: 1, Term: 5, Inc: inc, N: n, TS: at.UnixMilli()}
	}
	for n := uint64(1); n <= 3; n++ {
		if err := g.Check(msg(n, start), start); err != nil {
			t.Fatalf("message %d: %v", n, err)
		}
	}
	forgedAt := start.Add(100 * time.Millisecond)
	forged := msg(1<<62, forgedAt)
	if err := g.Check(forged, forgedAt); err != nil {
		t.Fatalf("the forgery: %v", err)
	}
	// While the forgery is fresh, the sender's own messages are behind.
	soon := forgedAt.Add(maxAge)
	if err := g.Check(msg(4, soon), soon); ReasonOf(err) != ReasonReplayed {
		t.Errorf("own message while the forgery is fresh: got %v, want %s", err, ReasonReplayed)
	}
	// Once it has expired, the sender is heard again, each message once.
	later := forgedAt.Add(maxAge + time.Millisecond)
	if err := g.Check(msg(5, later), later); err != nil {
		t.Fatalf("own message once the forgery expired: %v", err)
	}
	if err := g.Check(msg(6, later), later); err != nil {
		t.Errorf("the next: %v", err)
	}
	for _, m := range []Message{msg(5, later), msg(6, later), msg(4, soon)} {
		if err := g.Check(m, later); ReasonOf(err) != ReasonReplayed {
			t.Errorf("copy of number %d: got %v, want %s", m.N, err, ReasonReplayed)
		}
	}
	for _, m := range []Message{forged, msg(2, start)} {
		if err := g.Check(m, later); ReasonOf(err) != ReasonExpired {
			t.Errorf("copy of number %d: got %v, want %s", m.N, err, ReasonExpired)
		}
	}
	// A forgery dated ahead by up to MaxAge mutes for twice MaxAge at most.
	ahead := later.Add(maxAge)
	if err := g.Check(msg(1<<62, ahead), later); err != nil {
		t.Fatalf("a forgery dated ahead: %v", err)
	}
	if at := ahead.Add(maxAge); g.Check(msg(7, at), at) == nil {
		t.Errorf("own message at %v after the forgery's date: accepted, want refused", maxAge)
	}
	if at := ahead.Add(maxAge + time.Millisecond); g.Check(msg(8, at), at) != nil {
		t.Errorf("own message once the forgery dated ahead expired: refused")
	}
}

// A sender that falls silent for longer than MaxAge and then goes on is
// not reset: its next messages are ahead, and copies of its earlier ones
// stay refused.
func TestReplayGuardSilentSenderGoesOn(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	maxAge := 2 * time.Second
	g := NewReplayGuard(maxAge)
	inc := uint64(start.Add(-time.Minute).UnixNano())
	msg := func(n uint64, at time.Time) Message {
		return Message{V: Version, Type: TypeHeartbeat, From: 1, Term: 5, Inc: inc, N: n, TS: at.UnixMilli()}
	}
	for n := uint64(1); n <= 3; n++ {
		if err := g.Check(msg(n, start), start); err != nil {
			t.Fatalf("message %d: %v", n, err)
		}
	}
	later := start.Add(time.Minute)
	if err := g.Check(msg(10, later), later); err != nil {
		t.Fatalf("after a silence: %v", err)
	}
	if err := g.Check(msg(8, later), later); err != nil {
		t.Errorf("one that the 10th overtook: %v", err)
	}
	for _, n := range []uint64{8, 10} {
		if err := g.Check(msg(n, later), later); ReasonOf(err) != ReasonReplayed {
			t.Errorf("copy of number %d: got %v, want %s", n, err, ReasonReplayed)
		}
	}
}
