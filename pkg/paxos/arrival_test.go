package paxos

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// A Propose handed over before ticks that fell due before it arrived (the
// runtime settling at a deadline) grants from its arrival: the grant lasts
// L+1 ticks from the tick it arrived in, not from the machine's tick, so
// it never ends before the leader's lease (L' ticks from the send) does.
func TestGrantCountsFromArrival(t *testing.T) {
	const late = 6
	a := newNode(t, 2, election.HardState{})
	a.Start()
	a.Ready()
	var _ election.ArrivalStepper = a
	p := msg(protocol.TypePropose, 8, 0, 4)
	p.Seq = 1
	a.StepAt(p, a.now+late)
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"accepted→8:4"}) {
		t.Fatalf("Propose: got %v, want an acceptance", got)
	}
	ticks(a, late+timing.LeaseTicks)
	a.Step(msg(protocol.TypePrepare, 9, 0, 5))
	rd := a.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"nack→9:4"}) || rd.Messages[0].Wait != 1 {
		t.Fatalf("Prepare on the grant's last tick, counted from the arrival: got %+v, want a nack with 1 tick to wait", rd.Messages)
	}
	ticks(a, 1)
	a.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"promise→9:5"}) {
		t.Errorf("Prepare after the grant: got %v, want a promise", got)
	}

	// An arrival before the machine's tick (a driver that gives the ticks
	// first) counts from the machine's tick: never shorter.
	b := newNode(t, 4, election.HardState{})
	b.Start()
	b.Ready()
	ticks(b, 3)
	b.StepAt(p, 0)
	b.Ready()
	ticks(b, timing.LeaseTicks)
	b.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(b.Ready().Messages); !slices.Equal(got, []string{"nack→9:4"}) {
		t.Errorf("Prepare on the grant's last tick: got %v, want a nack", got)
	}
}

// A follower that times its leader out and then hears it renew again,
// with its ballot or a new one, learns the silence it did not wait out:
// its time-out afterwards covers one as long, so the next stall of the
// same host does not fire it again. A silence ended by another leader,
// or by the leader's return after its connection closed, teaches nothing.
func TestFollowerLearnsADisprovedSuspicion(t *testing.T) {
	renew := func(m *Machine, from, ballot uint64) {
		p := msg(protocol.TypePropose, from, 0, ballot)
		p.Candidate, p.Seq = from, 1
		m.Step(p)
		m.Ready()
	}
	follower := func() *Machine {
		m := newNode(t, 4, election.HardState{})
		m.Start()
		m.Ready()
		for range 10 {
			renew(m, 9, 5)
			ticks(m, timing.HeartbeatTicks)
		}
		if got := m.limit(); got != timing.LeaderTimeoutTicks {
			t.Fatalf("renewed every heartbeat: limit %d, want the leader time-out %d", got, timing.LeaderTimeoutTicks)
		}
		return m
	}
	silence := 3 * timing.LeaderTimeoutTicks

	m := follower()
	rd := ticks(m, silence-timing.HeartbeatTicks)
	if !slices.ContainsFunc(rd.Events, func(e election.Event) bool { return e.Kind == election.LeaderTimedOut }) {
		t.Fatalf("silent for %d ticks: events %v, want the leader timed out", silence, rd.Events)
	}
	renew(m, 9, 10) // alive after all, under a new ballot
	if got := m.limit(); got < silence+silence/2 {
		t.Errorf("after a suspicion the leader's renewal disproved: limit %d, want at least 1.5 × the %d-tick silence", got, silence)
	}

	m = follower()
	ticks(m, silence-timing.HeartbeatTicks)
	renew(m, 8, 8) // another leader
	renew(m, 9, 10)
	if got := m.limit(); got != timing.LeaderTimeoutTicks {
		t.Errorf("another leader in between: limit %d, want the leader time-out %d", got, timing.LeaderTimeoutTicks)
	}

	m = follower()
	m.PeerDown(9)
	m.Ready()
	ticks(m, silence-timing.HeartbeatTicks)
	renew(m, 9, 10)
	if got := m.limit(); got != timing.LeaderTimeoutTicks {
		t.Errorf("back after its connection closed: limit %d, want the leader time-out %d", got, timing.LeaderTimeoutTicks)
	}
}

// A renewal handed over before the ticks of the node's own stall, in
// which it arrived (the runtime settling at a late deadline), counts the
// leader as heard from its arrival: the stall's ticks, given after it,
// do not time the leader out just after its renewal.
func TestLeaderHeardFromTheRenewalsArrival(t *testing.T) {
	m, p := renewedFollower(t)
	const stall = 8 // ticks the node was late; the next renewal arrived in the last
	p.Seq = 2
	m.StepAt(p, m.now+stall)
	m.Ready()
	rd := ticks(m, stall+timing.LeaderTimeoutTicks-1)
	if slices.ContainsFunc(rd.Events, func(e election.Event) bool { return e.Kind == election.LeaderTimedOut }) {
		t.Errorf("a leader time-out less than the time-out after the renewal's arrival: events %v, want no time-out", rd.Events)
	}
	if rd = ticks(m, 1); !slices.ContainsFunc(rd.Events, func(e election.Event) bool { return e.Kind == election.LeaderTimedOut }) {
		t.Errorf("the time-out after the renewal's arrival: events %v, want the leader timed out", rd.Events)
	}
}

// renewedFollower returns node 4 after a renewal of leader 9's ballot 5
// (round 1), and that renewal.
func renewedFollower(t *testing.T) (*Machine, protocol.Message) {
	t.Helper()
	m := newNode(t, 4, election.HardState{})
	m.Start()
	m.Ready()
	p := msg(protocol.TypePropose, 9, 0, 5)
	p.Candidate, p.Seq = 9, 1
	m.Step(p)
	m.Ready()
	return m, p
}

// A member's message handed over before ticks that fell due before it
// arrived (a node resumed from a pause, which holds a deadline and then
// catches up) counts the member present from its arrival: the ticks given
// next do not make it look silent, and it stays a member until the
// member time-out after the arrival.
func TestPresenceCountsFromArrival(t *testing.T) {
	m, err := New(election.Config{ID: 4, Members: []uint64{4}, Dynamic: true, Voters: []uint64{1, 2, 3},
		Timing: election.DefaultLeaseTiming(5), Incarnation: 4})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	limit := election.MemberTimeoutFactor * m.timing.PresenceTicks
	late := limit / 2
	m.StepAt(protocol.Message{Type: protocol.TypePresence, From: 2, Inc: 2}, m.now+late)
	if !slices.Contains(m.Members(), 2) {
		t.Fatalf("members %v after 2's presence, want 2 among them", m.Members())
	}
	ticks(m, late+limit-1)
	if !slices.Contains(m.Members(), 2) {
		t.Fatalf("members %v a tick before the member time-out counted from the arrival, want 2 still present", m.Members())
	}
	ticks(m, 1)
	if slices.Contains(m.Members(), 2) {
		t.Errorf("members %v at the member time-out after the arrival, want 2 gone", m.Members())
	}
}

// A candidate of a cluster with dynamic membership gives a ballot that
// stalls as long as a static cluster of the members present would
// (core.CoordinatorTicks), not the time-out of a cluster of one: with 100
// members on a loaded host the answers to a Prepare took longer than a
// cluster of one's 10 ticks, and the highest ID, starting a new ballot
// every 10 ticks, ignored each answer as one to an old ballot.
func TestDynamicBallotWaitGrowsWithMembers(t *testing.T) {
	m, err := New(election.Config{ID: 100, Members: []uint64{100}, Dynamic: true, Voters: []uint64{1, 2, 3},
		Timing: election.DefaultLeaseTiming(1), Incarnation: 100})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	for id := uint64(1); id <= 20; id++ {
		m.Step(protocol.Message{Type: protocol.TypePresence, From: id, Inc: id})
	}
	prepares := func() int {
		n := 0
		for _, msg := range m.Ready().Messages {
			if msg.Type == protocol.TypePrepare {
				n++
			}
		}
		return n
	}
	if prepares() != 1 {
		t.Fatal("no Prepare at the start")
	}
	// The first ballot was started with one member present.
	for k := 1; prepares() == 0; k++ {
		if m.Tick(); k > 1000 {
			t.Fatal("the first ballot never started again")
		}
	}
	want := (len(m.Members()) + 1) * m.timing.AnswerTicks
	for k := 1; k <= want; k++ {
		m.Tick()
		if n := prepares(); n > 0 && k < want {
			t.Fatalf("a new ballot %d ticks after the last, with %d members present; want %d ticks", k, len(m.Members()), want)
		} else if n > 0 {
			return
		}
	}
	t.Fatalf("no new ballot within %d ticks", want)
}
