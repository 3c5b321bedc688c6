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
	lapseAndLeadAgain(t, c, leader.timing.LeaderLeaseTicks+base*9/10, term, func([]protocol.Message) {})
	if got := leader.limit(); got <= base {
		t.Errorf("after leading again: limit %d, want above %d", got, base)
	}
}

// A certified leader whose lease lapsed (its quorum's answers late, or
// its host stalled) does not give its term up for it: it signs no
// time-out of its own term, however long the lapse, and leads again in
// the same term once a quorum answers. Were it to sign, one follower
// that timed it out beside it would make the f+1 time-outs that every
// member joins.
func TestCertifiedLeaderKeepsItsTermThroughALapse(t *testing.T) {
	c := newSteadyCluster(t)
	leader := c.ms[4]
	term := leader.Status().Term
	// Its host stalls: it ticks alone, and what it sends is lost.
	stall := leader.timing.LeaderLeaseTicks + 3*election.MaxAdaptiveTimeoutFactor*leader.timing.LeaderTimeoutTicks
	lapseAndLeadAgain(t, c, stall, term, func(sent []protocol.Message) {
		if n := timeoutsOf(sent, term); n != 0 {
			t.Fatalf("lease lapsed for %d ticks: signed a time-out of its own term %d", leader.now, term)
		}
	})
}

// lapseAndLeadAgain stalls the steady cluster's leader, 4, for stall
// ticks (it ticks alone, and what it sends, handed to each, is lost),
// checks that its lease lapsed, then that it leads term again within
// two heartbeat intervals of the cluster's ticks.
func lapseAndLeadAgain(t *testing.T, c *steadyCluster, stall int, term uint64, each func(sent []protocol.Message)) {
	t.Helper()
	leader := c.ms[4]
	for range stall {
		leader.Tick()
		each(leader.Ready().Messages)
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
}

// A follower that gave its leader's term up for its silence, and whose
// leader leads again in a later term (here 4 leads terms 1 and 5 of
// four members), learns the silence from the leader's first certified
// round there: its time-out afterwards covers one as long, so the next
// stall of the same host does not fire it again. A certified round of
// another leader in between teaches it nothing.
func TestFollowerLearnsADisprovedSuspicion(t *testing.T) {
	const n = 4
	certOf := func(term, leader uint64) *certify.Certificate {
		var votes []certify.SignedStatement
		for _, id := range []uint64{1, 2, 3} {
			votes = append(votes, *signedVote(t, n, id, term, leader))
		}
		c, err := certify.NewCertificate(votes)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	var seq uint64
	round := func(m *Machine, term, leader uint64) {
		seq++
		m.Step(protocol.Message{Type: protocol.TypeBzPropose, From: leader, Term: term, Seq: seq, Cert: certOf(term, leader)})
		m.Ready()
	}
	tick := func(m *Machine, k int) {
		for range k {
			m.Tick()
			m.Ready()
		}
	}
	for _, other := range []bool{false, true} {
		m := newTestMachine(t, n, 1)
		base := m.timing.LeaderTimeoutTicks
		for range 10 {
			round(m, 1, 4)
			tick(m, m.timing.HeartbeatTicks)
		}
		if got := m.limit(); got != base {
			t.Fatalf("a round every heartbeat: limit %d, want %d", got, base)
		}
		silence := 3 * base
		tick(m, silence-m.timing.HeartbeatTicks)
		if m.quit != 1 {
			t.Fatalf("silent for %d ticks: gave up term %d, want 1", silence, m.quit)
		}
		for x := uint64(1); x <= 4; x++ {
			m.Step(protocol.Message{Type: protocol.TypeBzStatus, From: 2, To: 1, Term: x + 1, TC: timeoutCert(t, n, x, 1, 2, 3)})
			m.Ready()
			if x == 1 && other {
				round(m, 2, 3)
			}
		}
		if st := m.Status(); st.Term != 5 {
			t.Fatalf("on the time-out certificates: term %d, want 5", st.Term)
		}
		round(m, 5, 4)
		got := m.limit()
		switch {
		case !other && got < silence+silence/2:
			t.Errorf("the leader of term 1 certified in term 5: limit %d, want at least 1.5 × the %d-tick silence", got, silence)
		case other && got != base:
			t.Errorf("another leader's round in between: limit %d, want %d", got, base)
		}
	}
}

// A round handed over before the ticks of the member's own stall, in
// which it arrived (the runtime settling at a late deadline), counts the
// leader as heard from its arrival: the stall's ticks, given after it,
// do not time the leader out just after its round.
func TestLeaderHeardFromTheRoundsArrival(t *testing.T) {
	c := newSteadyCluster(t)
	m := c.ms[1]
	for range m.timing.HeartbeatTicks {
		c.tick()
	}
	leader := c.ms[4]
	var round protocol.Message
	for range leader.timing.HeartbeatTicks {
		leader.Tick()
		for _, msg := range leader.Ready().Messages {
			if msg.Type == protocol.TypeBzPropose {
				round = msg
			}
		}
	}
	if round.Type != protocol.TypeBzPropose || round.Cert == nil {
		t.Fatalf("the leader's round: %+v, want a certified Propose", round)
	}
	const stall = 8 // ticks the member was late; the round arrived in the last
	m.StepAt(round, m.now+stall)
	m.Ready()
	term := m.Status().Term
	for range stall + m.limit() - 1 {
		m.Tick()
		if n := timeoutsOf(m.Ready().Messages, term); n != 0 {
			t.Fatalf("%d ticks after the round's arrival, within the time-out: timed the term out", m.now)
		}
	}
}
