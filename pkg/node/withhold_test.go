package node

import (
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// follower is a machine with one deadline, its leader's time-out: a
// message resets it, a closed connection makes it a candidate.
type follower struct {
	now, heardAt, timeout, timedOut int
	role                            election.Role
	peerDown                        []int // the ticks at which PeerDown came
}

func (m *follower) Start() {}
func (m *follower) Tick() {
	m.now++
	if m.role == election.Follower && m.timedOut == 0 && m.now-m.heardAt >= m.timeout {
		m.timedOut = m.now
	}
}
func (m *follower) Due() int {
	if m.role != election.Follower || m.timedOut != 0 {
		return 1 << 30
	}
	return max(1, m.heardAt+m.timeout-m.now)
}
func (m *follower) Step(protocol.Message) { m.heardAt = m.now }
func (m *follower) Unreachable(uint64)    {}
func (m *follower) PeerDown(uint64) {
	m.peerDown = append(m.peerDown, m.now)
	m.role = election.Candidate
}
func (m *follower) Resign()                    {}
func (m *follower) Ready() election.Ready      { return election.Ready{} }
func (m *follower) Status() election.SoftState { return election.SoftState{Role: m.role} }

// lateNode is a node of algorithm (not byzantine: it has no keys) whose
// machine m started m.timeout ticks and late before now: the node
// reaches m's deadline late by late.
func lateNode(t *testing.T, algorithm protocol.Algorithm, m *follower, late time.Duration) *Node {
	t.Helper()
	n, err := newTestNode(endpoint(1), endpoint(1), Config{
		Cluster:   "withhold",
		Algorithm: algorithm,
		Election:  electionConfig(1, []uint64{1, 2, 3}),
		DataDir:   t.TempDir(),
		Logger:    testLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	drv, err := driver.New(m, driver.Config{Tick: DefaultTick, Incarnation: 1})
	if err != nil {
		t.Fatalf("driver.New: %v", err)
	}
	n.drv = drv
	drv.Start(time.Now().Add(-time.Duration(m.timeout)*DefaultTick - late))
	return n
}

func counted(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A late node withholds its deadline, and the leader's message in the
// hold ends it: the machine never times out. Without leases the
// machine's clock resumes at the deadline (the node's lateness does not
// count against the leader); with leases it catches up with real time.
func TestWithheldDeadlineEndsOnAMessage(t *testing.T) {
	for _, c := range []struct {
		algorithm protocol.Algorithm
		skips     bool
	}{{protocol.Bully, true}, {protocol.Ring, true}, {protocol.Paxos, false}} {
		t.Run(string(c.algorithm), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &follower{timeout: 50}
				n := lateNode(t, c.algorithm, m, 100*time.Millisecond)
				n.advance(time.Now())
				if n.held.deadline != 50 || m.now != 49 || m.timedOut != 0 {
					t.Fatalf("late by 100ms: held %d, machine at tick %d, timed out at %d; want held 50 at tick 49, no time-out", n.held.deadline, m.now, m.timedOut)
				}
				time.Sleep(3 * DefaultTick)
				n.handle(transport.Inbound{Kind: transport.Message, Msg: protocol.Message{Type: protocol.TypeHeartbeat, From: 2, Term: 1}, At: time.Now()})
				if n.held.deadline != 0 || counted(t, n.metrics.withheld.WithLabelValues(withheldHeard)) != 1 {
					t.Fatalf("the heartbeat did not end the hold: %+v", n.held)
				}
				n.advance(time.Now())
				if m.timedOut != 0 {
					t.Fatalf("timed out at tick %d after the leader was heard", m.timedOut)
				}
				// The deadline (tick 50) 100ms ago, heard 30ms into the
				// hold: real time is at tick 63.
				skipped := n.offset != 0
				if skipped != c.skips || (c.skips && m.now != 49) || (!c.skips && m.now != 63) {
					t.Errorf("offset %v, machine at tick %d; want the clock resumed at tick 49 (%v) or caught up at 63", n.offset, m.now, c.skips)
				}
			})
		})
	}
}

// A closed connection in a hold reaches the machine at once: crash
// failover through connection events does not wait for the hold.
func TestWithheldDeadlineTakesAClosedConnectionAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &follower{timeout: 50}
		n := lateNode(t, protocol.Bully, m, 100*time.Millisecond)
		n.advance(time.Now())
		n.handle(transport.Inbound{Kind: transport.PeerDown, Peer: 2, At: time.Now()})
		if len(m.peerDown) != 1 || m.peerDown[0] != 49 || n.held.deadline != 0 {
			t.Fatalf("PeerDown at ticks %v, hold %+v; want it at once (tick 49) and the hold over", m.peerDown, n.held)
		}
	})
}

// A hold that nothing ends expires after a heartbeat interval, the
// bound and as long as the node was late, once the loop has handled what
// arrived within it, and the machine times out: at once with leases,
// and without them a tick later, its clock resumed at the deadline so
// that the deadline's next wait starts then; a leader, and a node on
// time, never withhold.
func TestWithheldDeadlineExpires(t *testing.T) {
	for _, c := range []struct {
		algorithm protocol.Algorithm
		skips     bool
	}{{protocol.Bully, true}, {protocol.Paxos, false}} {
		t.Run(string(c.algorithm), func(t *testing.T) { testWithheldDeadlineExpires(t, c.algorithm, c.skips) })
	}
}

func testWithheldDeadlineExpires(t *testing.T, algorithm protocol.Algorithm, skips bool) {
	synctest.Test(t, func(t *testing.T) {
		m := &follower{timeout: 50}
		n := lateNode(t, algorithm, m, 100*time.Millisecond)
		n.advance(time.Now())
		grace := time.Duration(testTiming.HeartbeatTicks+lateTicks)*DefaultTick + 100*time.Millisecond
		time.Sleep(grace - time.Nanosecond)
		n.advance(time.Now())
		if m.timedOut != 0 {
			t.Fatalf("timed out at tick %d within the hold", m.timedOut)
		}
		time.Sleep(time.Second)
		// The loop, behind, handles an event that arrived within the
		// hold: the hold still stands.
		n.advance(time.Now().Add(-time.Second))
		if m.timedOut != 0 || n.held.deadline == 0 {
			t.Fatalf("an event that arrived within the hold, handled after its end: held %d, timed out at tick %d; want the hold standing", n.held.deadline, m.timedOut)
		}
		n.advance(time.Now())
		grace += time.Second - time.Nanosecond // noticed that late
		if n.health.withheld != grace || counted(t, n.metrics.withheld.WithLabelValues(withheldExpired)) != 1 {
			t.Fatalf("withheld %v, want %v, and one expired hold", n.health.withheld, grace)
		}
		if skips {
			if m.timedOut != 0 || m.now != 49 {
				t.Fatalf("hold expired: timed out at tick %d, machine at tick %d; want the clock resumed at tick 49", m.timedOut, m.now)
			}
			time.Sleep(DefaultTick)
			n.advance(time.Now())
		}
		if m.timedOut != 50 {
			t.Fatalf("timed out at tick %d after the hold expired; want tick 50", m.timedOut)
		}
		if n.health.late != 100*time.Millisecond {
			t.Errorf("late %v, want 100ms", n.health.late)
		}
	})
	for _, c := range []struct {
		name string
		role election.Role
		late time.Duration
	}{{"leader", election.Leader, 100 * time.Millisecond}, {"on time", election.Follower, 2 * DefaultTick}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &follower{timeout: 50, role: c.role}
				n := lateNode(t, protocol.Bully, m, c.late)
				n.advance(time.Now())
				if n.held.deadline != 0 || m.now < 50 {
					t.Fatalf("held %d with the machine at tick %d; want no hold", n.held.deadline, m.now)
				}
			})
		})
	}
}

// A stall of the node seen longer before a time-out than the learnt
// time-out's bound (MaxLeaderTimeoutFactor) but within the longest
// adaptive one still makes the time-out the node's own lateness
// (node_late): the evidence covers as long as a follower may wait for
// its leader.
func TestLatenessCountsWithinTheLongestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := lateNode(t, protocol.Bully, &follower{timeout: 50}, 0)
		bound := n.lateBound()
		n.health.timerLag.note(time.Now(), 3*bound)
		ago := n.ticks(2 * election.MaxLeaderTimeoutFactor * testTiming.LeaderTimeoutTicks)
		time.Sleep(ago)
		if !n.health.wasLate(time.Now(), bound) {
			t.Errorf("a timer %v late %v ago: not counted as late", 3*bound, ago)
		}
		time.Sleep(n.ticks(election.MaxAdaptiveTimeoutFactor * testTiming.LeaderTimeoutTicks))
		if n.health.wasLate(time.Now(), bound) {
			t.Errorf("a timer late longer ago than the longest time-out: still counted as late")
		}
	})
}

// membershipClock is a follower of leader 2 whose soonest deadline is a
// clock of its own that no message moves (the member time-outs of
// dynamic membership): losing its leader makes it campaign after a wait
// that ends later than that deadline.
type membershipClock struct {
	now, deadline, campaignAt int
	leader                    uint64
	// campaign, if not 0, is the tick at which losing the leader makes
	// it campaign, also moving its own deadline there; else it campaigns
	// 30 ticks after its deadline.
	campaign int
}

func (m *membershipClock) Start() {}
func (m *membershipClock) Tick() {
	m.now++
	if m.campaignAt != 0 && m.now >= m.campaignAt {
		m.campaignAt, m.leader = 0, 1 // it campaigned and won
	}
}
func (m *membershipClock) Due() int {
	d := m.deadline
	if m.campaignAt != 0 {
		d = min(d, m.campaignAt)
	}
	return max(1, d-m.now)
}
func (m *membershipClock) Step(protocol.Message) {}
func (m *membershipClock) Unreachable(uint64)    {}
func (m *membershipClock) PeerDown(id uint64) {
	switch {
	case id != m.leader:
	case m.campaign != 0:
		m.leader, m.campaignAt, m.deadline = 0, m.campaign, m.campaign
	default:
		m.leader, m.campaignAt = 0, m.deadline+30
	}
}
func (m *membershipClock) Resign()               {}
func (m *membershipClock) Ready() election.Ready { return election.Ready{} }
func (m *membershipClock) Status() election.SoftState {
	if m.leader == 0 {
		return election.SoftState{Role: election.Candidate}
	}
	return election.SoftState{Role: election.Follower, Leader: m.leader}
}

// heldNode is a Paxos node of m, a machine whose deadline is tick 50,
// reached late by late: it holds that deadline.
func heldNode(t *testing.T, m election.Machine, late time.Duration) *Node {
	t.Helper()
	n, err := newTestNode(endpoint(1), endpoint(1), Config{
		Cluster: "withhold", Algorithm: protocol.Paxos,
		Election: electionConfig(1, []uint64{1, 2, 3}), DataDir: t.TempDir(), Logger: testLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	drv, err := driver.New(m, driver.Config{Tick: DefaultTick, Incarnation: 1})
	if err != nil {
		t.Fatalf("driver.New: %v", err)
	}
	n.drv = drv
	drv.Start(time.Now().Add(-50*DefaultTick - late))
	n.advance(time.Now())
	if n.held.deadline != 50 {
		t.Fatalf("late by %v: held %d, want the deadline 50 held", late, n.held.deadline)
	}
	return n
}

// A hold ends when an event takes the node's leader away, even if the
// machine's soonest deadline stays where it was: the leader whose
// messages the hold waits for is gone, and the machine needs its clock
// to elect a successor. (A node resumed from a pause, holding a deadline
// of its member time-outs, otherwise sat out the leader's crash for the
// whole hold.)
func TestWithheldDeadlineEndsWhenTheLeaderIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &membershipClock{deadline: 50, leader: 2}
		n := heldNode(t, m, time.Second)
		n.handle(transport.Inbound{Kind: transport.PeerDown, Peer: 2, At: time.Now()})
		if n.drv.Deadline() != 50 {
			t.Fatalf("deadline %d after PeerDown; the test needs it unmoved at 50", n.drv.Deadline())
		}
		if n.held.deadline != 0 {
			t.Fatalf("the leader's connection closed and the hold stands: %+v", n.held)
		}
		n.advance(time.Now())
		if want := 50 + int(time.Second/DefaultTick); m.now != want {
			t.Errorf("machine at tick %d after the hold ended; want it caught up with real time, tick %d", m.now, want)
		}
	})
}

// A deadline that fell due within the stall that a hold answered is not
// withheld again once the hold ended: with leases the machine's clock
// catches up at once, and its next deadline, still in the past, comes
// "late" only because of the same stall. (A node resumed from a pause
// whose leader crashed in the hold campaigned, then held its campaign's
// next step for as long again.)
func TestWithheldStallIsNotWithheldTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &membershipClock{deadline: 50, leader: 2, campaign: 60}
		n := heldNode(t, m, time.Second)
		n.handle(transport.Inbound{Kind: transport.PeerDown, Peer: 2, At: time.Now()})
		if n.held.deadline != 0 {
			t.Fatalf("the leader's connection closed and the hold stands: %+v", n.held)
		}
		n.advance(time.Now())
		if n.held.deadline != 0 {
			t.Fatalf("deadline %d of the same stall withheld again", n.held.deadline)
		}
		if want := 50 + int(time.Second/DefaultTick); m.now != want || m.leader != 1 {
			t.Errorf("machine at tick %d, leader %d; want it caught up at tick %d and elected", m.now, m.leader, want)
		}
	})
}

// campaigner is a follower whose deadline, tick 50, makes it send a
// Prepare: what a node does when it reaches the deadline it held.
type campaigner struct {
	now  int
	sent []protocol.Message
}

func (m *campaigner) Start() {}
func (m *campaigner) Tick() {
	m.now++
	if m.now == 50 {
		m.sent = append(m.sent, protocol.Message{Type: protocol.TypePrepare, Term: 1})
	}
}
func (m *campaigner) Due() int {
	if m.now >= 50 {
		return 1 << 30
	}
	return 50 - m.now
}
func (m *campaigner) Step(protocol.Message) {}
func (m *campaigner) Unreachable(uint64)    {}
func (m *campaigner) PeerDown(uint64)       {}
func (m *campaigner) Resign()               {}
func (m *campaigner) Ready() election.Ready {
	rd := election.Ready{Messages: m.sent}
	m.sent = nil
	return rd
}
func (m *campaigner) Status() election.SoftState {
	return election.SoftState{Role: election.Follower, Leader: 2}
}

// A deadline held until the hold expired still acts: with leases the
// machine's clock then catches up with real time, and the deadline's
// tick, by then more than a hold behind the last, must not count among
// the stale ticks of a stall whose messages are dropped. (On a loaded
// host every deadline of a Paxos candidate came late, and each campaign
// it held was dropped as out of date: at 101 members on two cores the
// highest ID never sent a Prepare after its first.)
func TestHeldDeadlineActsWhenTheHoldExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &campaigner{}
		n := heldNode(t, m, 100*time.Millisecond)
		time.Sleep(time.Until(n.held.until) + DefaultTick)
		n.advance(time.Now())
		if n.held.deadline != 0 || m.now <= 50+election.StaleTicks {
			t.Fatalf("hold %+v, machine at tick %d; want the hold expired and the clock caught up", n.held, m.now)
		}
		rd := n.drv.Ready(time.Now())
		if len(rd.Messages) != 1 || rd.Messages[0].Type != protocol.TypePrepare {
			t.Errorf("after the hold: sent %v, dropped as stale %v; want the deadline's Prepare sent", rd.Messages, rd.Stale)
		}
	})
}
