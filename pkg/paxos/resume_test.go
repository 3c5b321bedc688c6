package paxos

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// A leader whose lease ran out (its renewals answered late) stops leading
// at once, proposes again under the same ballot, and with a majority's
// acceptance leads on in the same term: no election, no new claim, and
// its lease counts from the new proposal.
func TestLeaderResumesInItsTerm(t *testing.T) {
	m := elect(t)
	ticks(m, timing.LeaderLeaseTicks-1)
	if m.Status().Role != election.Leader {
		t.Fatalf("before the lease's end: role %v, want leader", m.Status().Role)
	}
	rd := ticks(m, 1)
	at := timing.LeaderLeaseTicks
	if st := m.Status(); st.Role == election.Leader || st.LeaseUntil != 0 {
		t.Fatalf("at the lease's end: status %+v, want not leader, no lease", st)
	}
	if got := show(rd.Messages); !slices.Equal(got, []string{"propose:5"}) || rd.Messages[0].Candidate != 0 {
		t.Fatalf("at the lease's end: sent %v, want a proposal of ballot 5 that names no leader yet", rd.Messages)
	}
	if rd.State != nil && rd.State.MaxTerm != 5 {
		t.Errorf("at the lease's end: stored %+v, want no new ballot", *rd.State)
	}
	seq := rd.Messages[0].Seq
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 9, 5)
		a.Seq = seq
		m.Step(a)
	}
	rd = m.Ready()
	st := m.Status()
	if st.Role != election.Leader || st.Term != 5 || st.LeaseUntil != at+timing.LeaderLeaseTicks {
		t.Fatalf("accepted again by a majority: status %+v, want leader of term 5 with its lease until %d", st, at+timing.LeaderLeaseTicks)
	}
	if rd.Claimed != 0 {
		t.Errorf("resumed: claimed %d, want no new claim", rd.Claimed)
	}
	if !slices.Equal(rd.Events, []election.Event{{Kind: election.LeaderResumed, Leader: 9, Term: 5}}) {
		t.Errorf("resumed: events %v, want only %v", rd.Events, election.LeaderResumed)
	}
	if got := show(rd.Messages); !slices.Equal(got, []string{"propose:5"}) || rd.Messages[0].Candidate != 9 {
		t.Errorf("resumed: sent %v, want a renewal naming 9", rd.Messages)
	}
}

// A leader whose host stalled gets the stall's ticks at once when it
// ends: its lease lapses within them, and the resume must outlast them,
// or the leader would campaign with a new ballot (a new term) before any
// answer to its resumed proposals could arrive. It goes on proposing
// under its ballot, and leads on in the same term when a majority
// accepts; after resumeTicks without a majority it campaigns.
func TestResumeOutlastsAStall(t *testing.T) {
	m := elect(t)
	stall := 10 * timing.LeaderTimeoutTicks // two seconds with the defaults
	rd := ticks(m, stall)
	for _, p := range rd.Messages {
		if p.Type == protocol.TypePrepare || p.Term != 5 {
			t.Fatalf("within a stall of %d ticks: sent %v, want only proposals of ballot 5", stall, show(rd.Messages))
		}
	}
	last := rd.Messages[len(rd.Messages)-1]
	if last.Type != protocol.TypePropose || last.Candidate != 0 {
		t.Fatalf("after the stall: last sent %v, want a resumed proposal", last)
	}
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 9, 5)
		a.Seq = last.Seq
		m.Step(a)
	}
	rd = m.Ready()
	if st := m.Status(); st.Role != election.Leader || st.Term != 5 || rd.Claimed != 0 {
		t.Fatalf("accepted after the stall: status %+v, claimed %d; want leader of term 5, no claim", st, rd.Claimed)
	}

	// Nobody answers: it campaigns after resumeTicks, and not before.
	m = elect(t)
	rd = ticks(m, timing.LeaderLeaseTicks+m.resumeTicks()-1)
	if slices.ContainsFunc(rd.Messages, func(p protocol.Message) bool { return p.Type == protocol.TypePrepare }) {
		t.Fatalf("within resumeTicks: sent %v, want no campaign", show(rd.Messages))
	}
	rd = ticks(m, 1)
	if !slices.ContainsFunc(rd.Messages, func(p protocol.Message) bool { return p.Type == protocol.TypePrepare && p.Term > 5 }) {
		t.Errorf("after resumeTicks without a majority: sent %v, want a campaign with a new ballot", show(rd.Messages))
	}
}

// An acceptor that promised a higher ballot while the lease lapsed
// refuses the resumed proposal: without a majority the node does not
// lead, and campaigns with a new ballot when an idle node would.
func TestResumeRefusedByAHigherPromise(t *testing.T) {
	m := elect(t)
	rd := ticks(m, timing.LeaderLeaseTicks)
	seq := rd.Messages[len(rd.Messages)-1].Seq
	a := msg(protocol.TypeAccepted, 2, 9, 5)
	a.Seq = seq
	m.Step(a)
	n := msg(protocol.TypeNack, 4, 9, 14) // 4 promised ballot 14 (node 8's)
	n.Seq = seq
	m.Step(n)
	if st := m.Status(); st.Role == election.Leader {
		t.Fatalf("one acceptance and a refusal: status %+v, want not leader", st)
	}
	rd = ticks(m, 3*timing.LeaderTimeoutTicks)
	if st := m.Status(); st.Role == election.Leader {
		t.Fatalf("no majority: status %+v, want not leader", st)
	}
	if !slices.ContainsFunc(rd.Messages, func(p protocol.Message) bool { return p.Type == protocol.TypePrepare && p.Term > 14 }) {
		t.Errorf("no majority: sent %v, want a campaign with a ballot above 14", show(rd.Messages))
	}
}

// A follower that has not heard its leader's renewals for a while asks
// it T before its time-out; the leader answers at once with a renewal,
// which ends the silence: the follower suspects nobody.
func TestFollowerProbesItsLeader(t *testing.T) {
	f := newNode(t, 4, election.HardState{})
	f.Start()
	f.Ready()
	p := msg(protocol.TypePropose, 9, 0, 5)
	p.Seq, p.Candidate = 1, 9
	f.Step(p)
	f.Ready()
	if st := f.Status(); st.Leader != 9 {
		t.Fatalf("after the leader's renewal: status %+v, want a follower of 9", st)
	}
	lead := min(timing.AnswerTicks, timing.LeaderTimeoutTicks-timing.HeartbeatTicks-1)
	if rd := ticks(f, timing.LeaderTimeoutTicks-lead-1); len(rd.Messages) != 0 {
		t.Fatalf("before the probe: sent %v", show(rd.Messages))
	}
	rd := ticks(f, 1)
	if got := show(rd.Messages); !slices.Equal(got, []string{"probe→9:5"}) {
		t.Fatalf("%d ticks before the time-out: sent %v, want a probe to 9", lead, got)
	}
	if !slices.Contains(rd.Events, election.Event{Kind: election.LeaderProbed, Leader: 9, Term: 5}) {
		t.Errorf("events %v, want the probe's", rd.Events)
	}

	l := elect(t)
	ticks(l, 1)
	l.Step(rd.Messages[0])
	ans := l.Ready()
	if got := show(ans.Messages); !slices.Equal(got, []string{"propose:5"}) || ans.Messages[0].Candidate != 9 {
		t.Fatalf("the leader's answer: %v, want a renewal naming 9", ans.Messages)
	}
	l.Step(rd.Messages[0])
	if again := l.Ready(); len(again.Messages) != 0 {
		t.Errorf("a second probe in the same tick: answered %v, want nothing", show(again.Messages))
	}

	f.Step(ans.Messages[0])
	got := f.Ready()
	if !slices.Contains(got.Events, election.Event{Kind: election.ProbeAnswered, Leader: 9, Term: 5}) {
		t.Errorf("answer heard: events %v, want the probe answered", got.Events)
	}
	rd = ticks(f, timing.LeaderTimeoutTicks-1)
	if st := f.Status(); st.Leader != 9 || slices.ContainsFunc(rd.Events, func(e election.Event) bool { return e.Kind == election.LeaderTimedOut }) {
		t.Errorf("after the answer: status %+v, events %v; want 9 still followed", st, rd.Events)
	}
}

// A follower that accepts its leader's proposal under the ballot it
// follows, resumed after the leader's lease lapsed (a proposal that
// names no leader), counts the leader as heard: it is alive and about to
// lead on in its term, and a follower that timed it out meanwhile would
// campaign with a new ballot, a new term, for nothing.
func TestFollowerWaitsForAResumingLeader(t *testing.T) {
	m, _ := renewedFollower(t)
	ticks(m, timing.LeaderTimeoutTicks-5)
	resume := msg(protocol.TypePropose, 9, 0, 5)
	resume.Seq = 2
	m.Step(resume)
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"accepted→9:5"}) {
		t.Fatalf("the resumed proposal: sent %v, want an acceptance", got)
	}
	rd := ticks(m, timing.LeaderTimeoutTicks-1)
	if slices.ContainsFunc(rd.Events, func(e election.Event) bool { return e.Kind == election.LeaderTimedOut }) {
		t.Errorf("within the time-out of the resumed proposal: events %v, want no time-out", rd.Events)
	}
	if st := m.Status(); st.Leader != 9 || st.Term != 5 {
		t.Errorf("status %+v, want leader 9 of term 5", st)
	}
}

// An acceptor that hears its leader renew vouches for it: it refuses the
// Prepare of a lower candidate, naming the leader and how long it will
// go on vouching, until its own time-out less a probe's lead has passed
// since the last renewal, also after the lease it granted ended (its
// time-out grew with the leader's stalls); then it promises. A candidate
// above the leader, or any candidate once the leader's connection
// closed, gets its promise once the grant ended.
func TestAcceptorVouchesForItsLeader(t *testing.T) {
	follower := func(leader, ballot uint64) *Machine {
		m := newNode(t, 2, election.HardState{})
		m.Start()
		m.Ready()
		var seq uint64
		renew := func(gap int) {
			ticks(m, gap)
			seq++
			p := msg(protocol.TypePropose, leader, 0, ballot)
			p.Candidate, p.Seq = leader, seq
			m.Step(p)
			m.Ready()
		}
		for range 3 {
			for range 5 {
				renew(timing.HeartbeatTicks)
			}
			renew(timing.LeaderTimeoutTicks - 1) // a stall, within the time-out
		}
		renew(timing.HeartbeatTicks)
		return m
	}
	m := follower(9, 5)
	limit := m.limit()
	vouching := limit - timing.AnswerTicks
	if vouching <= timing.LeaseTicks+1 {
		t.Fatalf("after a stall: limit %d, want more than the lease and a probe's lead", limit)
	}
	after := timing.LeaseTicks + 1 // the grant ended
	ticks(m, after)
	m.Step(msg(protocol.TypePrepare, 4, 0, 7))
	rd := m.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"nack→4:5"}) || rd.Messages[0].Candidate != 9 || rd.Messages[0].Wait != vouching-after {
		t.Fatalf("Prepare of a lower candidate %d ticks after a renewal: sent %+v, want a nack naming 9 with %d ticks to wait", after, rd.Messages, vouching-after)
	}
	ticks(m, vouching-after)
	m.Step(msg(protocol.TypePrepare, 4, 0, 12))
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"promise→4:12"}) {
		t.Errorf("Prepare once it no longer vouches: sent %v, want a promise", got)
	}

	m = follower(8, 4)
	ticks(m, after)
	m.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"promise→9:5"}) {
		t.Errorf("Prepare of a candidate above the leader: sent %v, want a promise", got)
	}

	m = follower(9, 5)
	m.PeerDown(9)
	m.Ready()
	ticks(m, after)
	m.Step(msg(protocol.TypePrepare, 4, 0, 7))
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"promise→4:7"}) {
		t.Errorf("Prepare after the leader's connection closed: sent %v, want a promise", got)
	}
}
