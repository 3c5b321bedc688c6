package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// steadyCluster is four members, 4 leading, that exchange every message
// at once: the state of a quiet cluster.
type steadyCluster struct {
	t  *testing.T
	ms map[uint64]*Machine
}

func newSteadyCluster(t *testing.T) *steadyCluster {
	c := &steadyCluster{t: t, ms: map[uint64]*Machine{}}
	for id := uint64(1); id <= 4; id++ {
		c.ms[id] = newTestMachine(t, 4, id)
	}
	for range 100 {
		c.tick()
	}
	if st := c.ms[4].Status(); st.Role != election.Leader {
		c.t.Fatalf("member 4 after 100 ticks: %+v, want the leader", st)
	}
	return c
}

// deliver hands msgs, and what they cause, to their addressees.
func (c *steadyCluster) deliver(from uint64, msgs []protocol.Message) {
	for _, msg := range msgs {
		for id, m := range c.ms {
			if id == from || msg.To != 0 && msg.To != id {
				continue
			}
			m.Step(msg)
			c.deliver(id, m.Ready().Messages)
		}
	}
}

func (c *steadyCluster) tick() {
	for id := uint64(1); id <= 4; id++ {
		if m, ok := c.ms[id]; ok {
			m.Tick()
			c.deliver(id, m.Ready().Messages)
		}
	}
}

// A follower of a steady leader need not wake before the leader time-out,
// nor the leader before its next round: the ticks that Due says can do
// nothing do nothing, and the quiet cluster is driven by the rounds alone.
func TestDueLetsAQuietMemberSleep(t *testing.T) {
	c := newSteadyCluster(t)
	timing := election.DefaultLeaseTiming(4)
	leader, follower := c.ms[4], c.ms[2]
	if d := leader.Due(); d < 1 || d > timing.HeartbeatTicks {
		t.Errorf("leader's Due %d, want 1..%d (its next round)", d, timing.HeartbeatTicks)
	}
	d := follower.Due()
	if d < timing.LeaderTimeoutTicks-timing.HeartbeatTicks {
		t.Fatalf("follower's Due %d just after a round, want at least %d: a quiet follower wakes only for the leader time-out",
			d, timing.LeaderTimeoutTicks-timing.HeartbeatTicks)
	}
	// The follower alone, deaf to the leader: nothing happens until its
	// Due, and the leader time-out then.
	for i := 1; i < d; i++ {
		follower.Tick()
		if r := follower.Ready(); len(r.Messages) > 0 || len(r.Events) > 0 || r.State != nil {
			t.Fatalf("tick %d of the %d that Due said could do nothing: %+v", i, d-1, r)
		}
	}
	follower.Tick()
	r := follower.Ready()
	var timedOut bool
	for _, e := range r.Events {
		timedOut = timedOut || e.Kind == election.LeaderTimedOut
	}
	if !timedOut {
		t.Errorf("tick %d (Due): %+v, want the leader timed out", d, r)
	}
}

// quietTicks runs m alone for ticks ticks and fails if a tick that Due
// said could do nothing did something; it returns the time-outs m sent.
func quietTicks(t *testing.T, m *Machine, ticks int) (timeouts int) {
	t.Helper()
	quiet := 0
	for i := range ticks {
		st := m.Status()
		m.Tick()
		r := m.Ready()
		if quiet > 0 && (len(r.Messages) > 0 || len(r.Events) > 0 || r.State != nil || r.Claimed != 0 || m.Status() != st) {
			t.Fatalf("tick %d: Due said %d more ticks could do nothing, but this one did: %+v", i, quiet, r)
		}
		for _, msg := range r.Messages {
			if msg.Type == protocol.TypeBzTimeout {
				timeouts++
			}
		}
		quiet = m.Due() - 1
	}
	return timeouts
}

// A member above its term's leader (it came back after the others moved
// on) times out for itself every leader time-out until it leads: Due
// wakes it for each, and for nothing between.
func TestDueWakesAHigherMemberForItsTimeouts(t *testing.T) {
	c := newSteadyCluster(t)
	timing := election.DefaultLeaseTiming(4)
	delete(c.ms, 4)
	for range 3 * (timing.LeaderTimeoutTicks + timing.LeaseTicks) {
		c.tick()
	}
	if st := c.ms[3].Status(); st.Role != election.Leader || st.Term != 2 {
		t.Fatalf("member 3 without 4: %+v, want the leader of term 2", st)
	}
	// 4 comes back and learns term 2 from the others' answers to its
	// hello, then runs alone: its time-outs reach nobody.
	back := newTestMachine(t, 4, 4)
	for _, m := range c.ms {
		m.Step(protocol.Message{Type: protocol.TypeBzHello, From: 4})
		for _, msg := range m.Ready().Messages {
			if msg.To == 4 {
				back.Step(msg)
			}
		}
	}
	back.Ready()
	if st := back.Status(); st.Term != 2 {
		t.Fatalf("member 4 back: %+v, want term 2, 3's", st)
	}
	if n := quietTicks(t, back, 4*timing.LeaderTimeoutTicks); n < 3 {
		t.Errorf("member 4 above the leader, alone for %d ticks: %d time-outs, want one each leader time-out",
			4*timing.LeaderTimeoutTicks, n)
	}
}

// The leader and a follower of a quiet cluster, alone: no tick that Due
// said could do nothing does something, through lease ends and time-outs.
func TestDueNeverSleepsThroughAnEffect(t *testing.T) {
	for _, id := range []uint64{4, 2} {
		c := newSteadyCluster(t)
		quietTicks(t, c.ms[id], 10*election.DefaultLeaderTimeoutTicks)
	}
}
