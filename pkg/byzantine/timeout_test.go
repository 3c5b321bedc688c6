package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// timeoutsOf counts the time-outs of term x among msgs.
func timeoutsOf(msgs []protocol.Message, x uint64) int {
	count := 0
	for _, msg := range msgs {
		if msg.Type == protocol.TypeBzTimeout && msg.Statement.Statement.Term == x {
			count++
		}
	}
	return count
}

// A leader that leaves is noticed twice: its Resign, and the connection
// event of its departure. A member signs its time-out of the term once
// for both: a second one, with the term's certificate, costs every other
// member a delivery and a check while the next term is being certified,
// and tells nothing new. Seen in the benchmark at 25 members: 24 extra
// broadcasts, answered by the members already in the next term.
func TestOneTimeoutForResignAndDeparture(t *testing.T) {
	for _, order := range []string{"resign first", "departure first"} {
		c := newSteadyCluster(t)
		m := c.ms[2]
		term := m.Status().Term
		resign := func() { m.Step(protocol.Message{Type: protocol.TypeResign, From: 4, Term: term}) }
		depart := func() { m.PeerDown(4) }
		first, second := resign, depart
		if order == "departure first" {
			first, second = depart, resign
		}
		first()
		if got := timeoutsOf(m.Ready().Messages, term); got != 1 {
			t.Fatalf("%s: %d time-outs of term %d, want 1", order, got, term)
		}
		second()
		r := m.Ready()
		if got := timeoutsOf(r.Messages, term); got != 0 {
			t.Errorf("%s: %d more time-outs of term %d after the second notice, want none", order, got, term)
		}
		if order == "resign first" {
			disconnected := false
			for _, e := range r.Events {
				disconnected = disconnected || e.Kind == election.LeaderDisconnected
			}
			if !disconnected {
				t.Errorf("%s: no LeaderDisconnected event for the departure", order)
			}
		}
	}
}

// A member that still gives its term up a leader time-out later, the
// next term not begun, signs the time-out again: the first may have been
// lost.
func TestTimeoutRepeatedWhileStuck(t *testing.T) {
	c := newSteadyCluster(t)
	m := c.ms[2]
	term := m.Status().Term
	m.PeerDown(4)
	m.Ready()
	repeated := 0
	for range 2*m.timing.LeaderTimeoutTicks + m.timing.LeaseTicks + 2 {
		m.Tick()
		repeated += timeoutsOf(m.Ready().Messages, term)
	}
	if repeated == 0 {
		t.Errorf("no time-out of term %d repeated while the next term did not begin", term)
	}
}
