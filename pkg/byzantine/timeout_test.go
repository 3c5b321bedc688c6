package byzantine

import (
	"testing"

	"github.com/baton-election/baton/pkg/certify"
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

// statusesTo counts the proofs (bz_status) sent to member to.
func statusesTo(msgs []protocol.Message, to uint64) int {
	count := 0
	for _, msg := range msgs {
		if msg.Type == protocol.TypeBzStatus && msg.To == to {
			count++
		}
	}
	return count
}

// A member that entered term t+1 does not answer a time-out of term t
// with its proof: the sender gives up the term just below, with the
// others, and their time-outs (or the rounds and time-outs of t+1, which
// carry the proof) bring it to t+1. At 25 members every member answered
// each late time-out of the term it had just left: hundreds of proofs,
// each a time-out certificate of a quorum's signatures, while the new
// term was being certified. A member further behind is still answered.
func TestNoProofForTheTermJustBelow(t *testing.T) {
	const n = 4
	m := newTestMachine(t, n, 2)
	m.Step(protocol.Message{Type: protocol.TypeBzStatus, From: 1, To: 2, Term: 2, TC: timeoutCert(t, n, 1, 1, 3, 4)})
	if st := m.Status(); st.Term != 2 {
		t.Fatalf("term %d, want 2", st.Term)
	}
	m.Ready()
	late := func(from, x uint64) protocol.Message {
		ss, err := certify.Sign(keysFor(t, n).signers[from], certify.Timeout(testCluster, from, x))
		if err != nil {
			t.Fatal(err)
		}
		return protocol.Message{Type: protocol.TypeBzTimeout, From: from, Term: x, Statement: &ss}
	}
	m.Step(late(4, 1))
	if got := statusesTo(m.Ready().Messages, 4); got != 0 {
		t.Errorf("in term 2, a time-out of term 1 answered with %d proofs, want none", got)
	}
	m.Step(protocol.Message{Type: protocol.TypeBzStatus, From: 1, To: 2, Term: 3, TC: timeoutCert(t, n, 2, 1, 3, 4)})
	if st := m.Status(); st.Term != 3 {
		t.Fatalf("term %d, want 3", st.Term)
	}
	m.Ready()
	m.Step(late(3, 1))
	if got := statusesTo(m.Ready().Messages, 3); got != 1 {
		t.Errorf("in term 3, a time-out of term 1 answered with %d proofs, want 1", got)
	}
}

// A leader whose lease ran out in a stall of its own and that led again
// in the same term learns from it, as its followers learn from its late
// rounds: its own time-out of its term grows with the gap, so that the
// next stall as long does not make it give its term up.
func TestLeaderLearnsFromItsOwnLapses(t *testing.T) {
	c := newSteadyCluster(t)
	leader := c.ms[4]
	base := leader.timing.LeaderTimeoutTicks
	if got := leader.limit(); got != base {
		t.Fatalf("steady leader: limit %d, want %d", got, base)
	}
	term := leader.Status().Term
	// Its host stalls: it ticks alone, and what it sends is lost.
	stall := leader.timing.LeaderLeaseTicks + base*9/10
	for range stall {
		leader.Tick()
		leader.Ready()
	}
	if st := leader.Status(); st.Role == election.Leader {
		t.Fatalf("after a stall of %d ticks: %+v, want the lease lapsed", stall, st)
	}
	for range 2 * leader.timing.HeartbeatTicks {
		c.tick()
	}
	if st := leader.Status(); st.Role != election.Leader || st.Term != term {
		t.Fatalf("after the stall: %+v, want the leader of term %d again", st, term)
	}
	if got := leader.limit(); got <= base {
		t.Errorf("after leading again: limit %d, want above %d", got, base)
	}
}
