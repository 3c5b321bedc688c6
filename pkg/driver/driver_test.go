package driver_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// fake is a machine that sends one heartbeat per tick, numbered by the
// tick (Seq), records the arrival tick of every message it is handed, and
// produces whatever the test queues in next.
type fake struct {
	now     int
	due     int
	status  election.SoftState
	arrived []int
	next    election.Ready
	started bool
}

func (f *fake) Start() { f.started = true }
func (f *fake) Tick() {
	f.now++
	f.next.Messages = append(f.next.Messages, protocol.Message{Type: protocol.TypeHeartbeat, From: 1, Seq: uint64(f.now)})
}
func (f *fake) Due() int                               { return max(f.due, 1) }
func (f *fake) Step(m protocol.Message)                { f.StepAt(m, f.now) }
func (f *fake) StepAt(_ protocol.Message, arrived int) { f.arrived = append(f.arrived, arrived) }
func (f *fake) Unreachable(uint64)                     {}
func (f *fake) PeerDown(uint64)                        {}
func (f *fake) Resign()                                {}
func (f *fake) Status() election.SoftState             { return f.status }
func (f *fake) Ready() election.Ready                  { rd := f.next; f.next = election.Ready{}; return rd }
func seqs(ms []protocol.Message) (s []uint64) {
	for _, m := range ms {
		s = append(s, m.Seq)
	}
	return s
}
func newDriver(t *testing.T, f election.Machine, tick time.Duration) *driver.Driver {
	t.Helper()
	d, err := driver.New(f, driver.Config{Tick: tick, Incarnation: 7})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

var t0 = time.Unix(1_800_000_000, 0)

func TestNewRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		m   election.Machine
		cfg driver.Config
	}{
		{nil, driver.Config{Tick: time.Millisecond, Incarnation: 1}},
		{&fake{}, driver.Config{Tick: 0, Incarnation: 1}},
		{&fake{}, driver.Config{Tick: -time.Millisecond, Incarnation: 1}},
		{&fake{}, driver.Config{Tick: time.Millisecond}},
	} {
		if _, err := driver.New(c.m, c.cfg); !errors.Is(err, driver.ErrConfig) {
			t.Errorf("New(%v, %+v) = %v, want ErrConfig", c.m, c.cfg, err)
		}
	}
}

// TestAdvanceDropsStaleTicks: after a stall the machine gets every tick it
// missed, but only the messages of the last election.StaleTicks ticks
// leave; the others are reported as stale. A wake-up a tick late is no
// stall.
func TestAdvanceDropsStaleTicks(t *testing.T) {
	f := &fake{}
	d := newDriver(t, f, 10*time.Millisecond)
	d.Start(t0)
	if !f.started {
		t.Fatal("Start did not start the machine")
	}
	d.Advance(t0.Add(105 * time.Millisecond)) // ticks 1 to 10
	rd := d.Ready(t0)
	if f.now != 10 || d.Ticks() != 10 {
		t.Fatalf("machine at tick %d, driver at %d, want 10", f.now, d.Ticks())
	}
	if got, want := seqs(rd.Messages), []uint64{8, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("sent the messages of ticks %v, want %v", got, want)
	}
	if got, want := seqs(rd.Stale), []uint64{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("dropped the messages of ticks %v, want %v", got, want)
	}
	d.Advance(t0.Add(50 * time.Millisecond)) // earlier: nothing
	d.Advance(t0.Add(129 * time.Millisecond))
	rd = d.Ready(t0)
	if got, want := seqs(rd.Messages), []uint64{11, 12}; !slices.Equal(got, want) || len(rd.Stale) != 0 {
		t.Errorf("two ticks late: sent %v, dropped %v; want %v sent, none dropped", got, seqs(rd.Stale), want)
	}
}

// TestSettleHandsArrivalTicks: Settle gives the ticks before the
// deadline's, and a message handed over then carries the (later) tick it
// arrived in; a leader does not settle.
func TestSettleHandsArrivalTicks(t *testing.T) {
	f := &fake{due: 40}
	d := newDriver(t, f, 10*time.Millisecond)
	d.Start(t0)
	if d.Deadline() != 40 {
		t.Fatalf("deadline %d, want 40", d.Deadline())
	}
	if !d.Settle() {
		t.Fatal("a follower did not settle")
	}
	for _, at := range []int{41, 47} {
		d.Step(protocol.Message{Type: protocol.TypePropose, From: 2}, d.At(at).Add(time.Millisecond))
	}
	if f.now != 39 || !slices.Equal(f.arrived, []int{41, 47}) {
		t.Fatalf("machine at tick %d got arrivals %v, want tick 39 with arrivals [41 47]", f.now, f.arrived)
	}
	f.status.Role = election.Leader
	if d.Settle() || f.now != 39 {
		t.Fatalf("a leader settled: machine at tick %d", f.now)
	}
}

// TestReadyMergesAndStamps: the Readies of several events merge (newest
// state, messages and events in order), the messages are stamped in
// order, and a claim is reported only while the machine leads with it.
func TestReadyMergesAndStamps(t *testing.T) {
	f := &fake{}
	d := newDriver(t, f, time.Millisecond)
	d.Start(t0)
	first, second := &election.HardState{Term: 1, MaxTerm: 1}, &election.HardState{Term: 2, MaxTerm: 2}
	f.next = election.Ready{State: first, Claimed: 1, Events: []election.Event{{Kind: election.ElectionStarted}},
		Messages: []protocol.Message{{Type: protocol.TypeElection, From: 1, Seq: 100}}}
	d.Unreachable(3)
	f.next = election.Ready{State: second, Events: []election.Event{{Kind: election.LeaderChanged, Leader: 1, Term: 1}},
		Messages: []protocol.Message{{Type: protocol.TypeCoordinator, From: 1, Seq: 101}}}
	f.status = election.SoftState{ID: 1, Leader: 1, Term: 1, Role: election.Leader}
	d.PeerDown(2)
	if !d.HasReady() {
		t.Fatal("HasReady is false with two Readies pending")
	}
	wall := t0.Add(1234 * time.Millisecond)
	rd := d.Ready(wall)
	if rd.State != second || rd.Claimed != 1 || rd.Status != f.status || len(rd.Events) != 2 || rd.Events[1].Kind != election.LeaderChanged {
		t.Errorf("merged Ready %+v: want the second state, claim 1, both events, the status", rd)
	}
	if got := seqs(rd.Messages); !slices.Equal(got, []uint64{100, 101}) {
		t.Fatalf("messages %v, want [100 101]", got)
	}
	for i, m := range rd.Messages {
		if m.Inc != 7 || m.N != uint64(i+1) || m.TS != wall.UnixMilli() {
			t.Errorf("message %d stamped inc=%d n=%d ts=%d, want 7, %d, %d", i, m.Inc, m.N, m.TS, i+1, wall.UnixMilli())
		}
	}
	if d.HasReady() {
		t.Error("HasReady after Ready")
	}
	// A claim the machine no longer holds is not announced.
	f.next = election.Ready{Claimed: 4}
	d.Resign()
	if rd := d.Ready(wall); rd.Claimed != 0 {
		t.Errorf("claim of term 4 reported while leading with term 1")
	}
}

// TestClaimHeldUntilLeadingAgain: a claim whose lease lapsed before
// Ready is reported once the machine leads again in the same term, which
// it does not claim again (a byzantine leader that a quorum's grants
// leave and come back to); a claim whose term is over is never reported.
func TestClaimHeldUntilLeadingAgain(t *testing.T) {
	f := &fake{}
	d := newDriver(t, f, time.Millisecond)
	d.Start(t0)
	f.next = election.Ready{Claimed: 5}
	f.status = election.SoftState{ID: 4, Leader: 4, Term: 5, Role: election.Candidate} // the lease lapsed at once
	d.PeerDown(1)
	if rd := d.Ready(t0); rd.Claimed != 0 {
		t.Fatalf("claim of term 5 reported while not leading")
	}
	f.status.Role = election.Leader // the lease is back, no new claim
	if rd := d.Ready(t0); rd.Claimed != 5 {
		t.Fatalf("claim %d once leading again in term 5, want 5", rd.Claimed)
	}
	if rd := d.Ready(t0); rd.Claimed != 0 {
		t.Fatalf("claim %d reported twice", rd.Claimed)
	}

	f.next = election.Ready{Claimed: 9}
	f.status = election.SoftState{ID: 4, Term: 9, Role: election.Candidate}
	d.PeerDown(1)
	d.Ready(t0)
	f.status = election.SoftState{ID: 4, Leader: 3, Term: 10, Role: election.Follower} // term 9 is over
	d.Ready(t0)
	f.status = election.SoftState{ID: 4, Leader: 4, Term: 13, Role: election.Leader}
	if rd := d.Ready(t0); rd.Claimed != 0 {
		t.Fatalf("claim %d reported after its term 9 ended", rd.Claimed)
	}
}

// TestObserveSeesEachStep: Observe sees each call of the machine alone,
// unstamped, with whether it was a tick and whether its messages are
// stale.
func TestObserveSeesEachStep(t *testing.T) {
	f := &fake{}
	var steps []driver.Step
	d, err := driver.New(f, driver.Config{Tick: time.Millisecond, Incarnation: 1, Observe: func(s driver.Step) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(t0)
	d.Advance(t0.Add(5 * time.Millisecond))
	d.Step(protocol.Message{From: 2}, t0.Add(5*time.Millisecond))
	if len(steps) != 7 || steps[0].Tick || !steps[1].Tick || !steps[2].Stale || steps[3].Stale || steps[6].Tick {
		t.Fatalf("steps %+v: want start, five ticks (the first two stale), a step", steps)
	}
	if m := steps[5].Ready.Messages[0]; m.Seq != 5 || m.Inc != 0 {
		t.Errorf("observed message %+v: want tick 5's, unstamped", m)
	}
}

// skipping is a fake whose deadline is every fourth tick, and that takes
// the ticks before it at once.
type skipping struct {
	fake
	skips []int
}

func (s *skipping) Due() int   { return 4 - s.now%4 }
func (s *skipping) Skip(n int) { s.now += n; s.skips = append(s.skips, n) }

// A machine that implements election.Skipper gets the ticks before its
// deadline in one call, and each deadline's tick as a Tick; one watched by
// Observe gets every tick.
func TestAdvanceSkipsToTheDeadline(t *testing.T) {
	s := &skipping{}
	d := newDriver(t, s, 10*time.Millisecond)
	d.Start(t0)
	d.Advance(t0.Add(105 * time.Millisecond)) // ticks 1 to 10
	if s.now != 10 || d.Ticks() != 10 {
		t.Fatalf("machine at tick %d, driver at %d, want 10", s.now, d.Ticks())
	}
	// Due 4: skip 3, tick the 4th; skip 3, tick the 8th; skip 2.
	if want := []int{3, 3, 2}; !slices.Equal(s.skips, want) {
		t.Errorf("skipped %v, want %v", s.skips, want)
	}
	rd := d.Ready(t0)
	if got, want := seqs(slices.Concat(rd.Stale, rd.Messages)), []uint64{4, 8}; !slices.Equal(got, want) {
		t.Errorf("ticks given %v, want %v", got, want)
	}

	watched := &skipping{}
	steps := 0
	w, err := driver.New(watched, driver.Config{Tick: 10 * time.Millisecond, Incarnation: 7, Observe: func(driver.Step) { steps++ }})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(t0)
	steps = 0
	w.Advance(t0.Add(105 * time.Millisecond))
	if len(watched.skips) != 0 || steps != 10 {
		t.Errorf("observed: skipped %v and saw %d steps, want no skip and 10 steps", watched.skips, steps)
	}
}
