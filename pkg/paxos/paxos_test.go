package paxos

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// members of the tests: terms owned by 2, 4, 6, 8, 9 are 1, 2, 3, 4, 5 mod 5.
var members = []uint64{2, 4, 6, 8, 9}

var timing = election.DefaultLeaseTiming(len(members))

func newNode(t *testing.T, id uint64, state election.HardState) *Machine {
	t.Helper()
	m, err := New(election.Config{ID: id, Members: members, Timing: timing, State: state, Restored: true, Incarnation: 100 + id})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func msg(typ protocol.Type, from, to, term uint64) protocol.Message {
	return protocol.Message{V: protocol.Version, Type: typ, From: from, To: to, Term: term, Inc: 100 + from}
}

// show renders messages as type→to:term, for compact comparison.
func show(msgs []protocol.Message) []string {
	var out []string
	for _, m := range msgs {
		s := string(m.Type)
		if m.To != 0 {
			s += "→" + strconv.FormatUint(m.To, 10)
		}
		s += ":" + strconv.FormatUint(m.Term, 10)
		out = append(out, s)
	}
	return out
}

func ticks(m *Machine, n int) election.Ready {
	var all election.Ready
	for range n {
		m.Tick()
		r := m.Ready()
		all.Messages = append(all.Messages, r.Messages...)
		all.Events = append(all.Events, r.Events...)
		if r.Claimed != 0 {
			all.Claimed = r.Claimed
		}
	}
	return all
}

// elect makes node 9 leader of the five with ballot 5: it starts, every
// other member promises and accepts. It returns the leader.
func elect(t *testing.T) *Machine {
	t.Helper()
	m := newNode(t, 9, election.HardState{})
	m.Start()
	rd := m.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"prepare:5"}) {
		t.Fatalf("Start (rule: a candidate broadcasts Prepare with a ballot above any it has seen): got %v", got)
	}
	if rd.State == nil || rd.State.MaxTerm != 5 || rd.State.Acceptor.Promised != 5 {
		t.Fatalf("Start: the ballot and the node's own promise must be stored before Prepare is sent: state %v", rd.State)
	}
	for _, id := range []uint64{2, 4} {
		m.Step(msg(protocol.TypePromise, id, 9, 5))
	}
	rd = m.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"propose:5"}) {
		t.Fatalf("with promises from a majority (rule: phase 2): got %v, want [propose:5]", got)
	}
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 9, 5)
		a.Seq = rd.Messages[0].Seq
		m.Step(a)
	}
	rd = m.Ready()
	if rd.Claimed != 5 || m.Status().Role != election.Leader || m.Status().LeaseUntil != timing.LeaderLeaseTicks {
		t.Fatalf("with acceptances from a majority: claimed %d, status %+v; want leader of term 5, lease until tick %d", rd.Claimed, m.Status(), timing.LeaderLeaseTicks)
	}
	return m
}

// The leader counts on its lease for LeaderLeaseTicks from when it sent the
// proposal; without a renewal accepted by a majority it stops leading when
// the lease ends, before anything else.
func TestLeaseRunsOut(t *testing.T) {
	m := elect(t)
	rd := ticks(m, timing.HeartbeatTicks)
	if got := show(rd.Messages); !slices.Equal(got, []string{"propose:5"}) || rd.Messages[0].Candidate != 9 {
		t.Fatalf("renewal (rule: the leader proposes again every heartbeat interval, naming itself once it holds the lease): got %v", rd.Messages)
	}
	ticks(m, timing.LeaderLeaseTicks-timing.HeartbeatTicks-1)
	if m.Status().Role != election.Leader {
		t.Fatalf("one tick before the lease ends: role %v, want leader", m.Status().Role)
	}
	rd = ticks(m, 1)
	if m.Status().Role == election.Leader || m.Status().LeaseUntil != 0 {
		t.Fatalf("at the lease's end: status %+v, want not leader and no lease", m.Status())
	}
	if !slices.ContainsFunc(rd.Events, func(e election.Event) bool { return e.Kind == election.SteppedDown }) {
		t.Errorf("at the lease's end: events %v, want %v", rd.Events, election.SteppedDown)
	}
}

// A renewal accepted by a majority extends the lease from when it was sent.
func TestRenewalExtendsLease(t *testing.T) {
	m := elect(t)
	rd := ticks(m, timing.HeartbeatTicks)
	sent := timing.HeartbeatTicks
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 9, 5)
		a.Seq = rd.Messages[0].Seq
		m.Step(a)
	}
	if got, want := m.Status().LeaseUntil, sent+timing.LeaderLeaseTicks; got != want {
		t.Errorf("lease after a renewal accepted by a majority: until tick %d, want %d", got, want)
	}
	// An acceptance of a round that is no longer counted changes nothing.
	a := msg(protocol.TypeAccepted, 6, 9, 5)
	a.Seq = 999
	m.Step(a)
	if got, want := m.Status().LeaseUntil, sent+timing.LeaderLeaseTicks; got != want {
		t.Errorf("after an unknown round: until tick %d, want %d", got, want)
	}
}

// Acceptors: a promise for a higher ballot, a refusal of a lower one, the
// last accepted proposal reported; every change stored before the answer.
func TestAcceptor(t *testing.T) {
	a := newNode(t, 2, election.HardState{Term: 4, MaxTerm: 4, Acceptor: election.AcceptorState{Promised: 4, Accepted: 4, Value: 8}})
	a.Start()
	ticks(a, timing.LeaseTicks+1) // restarted: it waits a lease
	a.Ready()
	a.Step(msg(protocol.TypePrepare, 9, 0, 10))
	rd := a.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"promise→9:10"}) || rd.Messages[0].Prior != 4 || rd.Messages[0].Candidate != 8 {
		t.Fatalf("Prepare above the promise (rule: promise, report what was accepted): got %+v", rd.Messages)
	}
	if rd.State == nil || rd.State.Acceptor.Promised != 10 {
		t.Fatalf("the promise must be stored with the answer: state %v", rd.State)
	}
	a.Step(msg(protocol.TypePrepare, 8, 0, 9))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"nack→8:10"}) {
		t.Errorf("Prepare below the promise (rule: ballots above any before): got %v, want [nack→8:10]", got)
	}
	p := msg(protocol.TypePropose, 8, 0, 9)
	p.Seq = 1
	a.Step(p)
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"nack→8:10"}) {
		t.Errorf("Propose below the promise: got %v, want [nack→8:10]", got)
	}
	p = msg(protocol.TypePropose, 9, 0, 10)
	p.Seq = 1
	a.Step(p)
	rd = a.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"accepted→9:10"}) || rd.Messages[0].Seq != 1 {
		t.Fatalf("Propose of the promised ballot (rule: acceptors accept): got %+v", rd.Messages)
	}
	if rd.State == nil || rd.State.Acceptor != (election.AcceptorState{Promised: 10, Accepted: 10, Value: 9}) {
		t.Fatalf("the acceptance must be stored with the answer: state %v", rd.State)
	}
	// A renewal of the same proposal changes nothing on disk.
	p.Seq = 2
	a.Step(p)
	if rd := a.Ready(); rd.State != nil {
		t.Errorf("renewal: stored %v again, want nothing to store", rd.State)
	}
	// A Prepare for a ballot its sender does not own is ignored.
	a.Step(msg(protocol.TypePrepare, 4, 0, 13)) // 13 is node 6's
	if rd := a.Ready(); len(rd.Messages) != 0 {
		t.Errorf("Prepare of someone else's ballot: got %v, want nothing", show(rd.Messages))
	}
}

// Leases: an acceptor promises no new ballot while a lease it granted may
// be valid (even to the same node ID from another process), tells how
// long it lasts, and promises once it has ended; it promises the process
// that holds it, which moves to a higher ballot.
func TestGrantBlocksPromises(t *testing.T) {
	a := newNode(t, 2, election.HardState{})
	a.Start()
	a.Ready()
	p := msg(protocol.TypePropose, 8, 0, 4)
	p.Seq = 1
	a.Step(p)
	a.Ready()
	ticks(a, 3)
	a.Step(msg(protocol.TypePrepare, 9, 0, 5))
	rd := a.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"nack→9:4"}) || rd.Messages[0].Candidate != 8 || rd.Messages[0].Wait != timing.LeaseTicks+1-3 {
		t.Fatalf("Prepare during the lease: got %+v, want a nack naming holder 8 and %d ticks", rd.Messages, timing.LeaseTicks+1-3)
	}
	other := msg(protocol.TypePrepare, 8, 0, 9)
	other.Inc = 999 // node 8's ID, another process
	a.Step(other)
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"nack→8:4"}) {
		t.Errorf("Prepare from another process with the holder's ID: got %v, want a nack", got)
	}
	a.Step(msg(protocol.TypePrepare, 8, 0, 9))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"promise→8:9"}) {
		t.Errorf("Prepare from the holder itself: got %v, want a promise", got)
	}
	b := newNode(t, 4, election.HardState{})
	b.Start()
	b.Ready()
	b.Step(p)
	b.Ready()
	ticks(b, timing.LeaseTicks)
	b.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(b.Ready().Messages); !slices.Equal(got, []string{"nack→9:4"}) {
		t.Errorf("Prepare on the lease's last tick: got %v, want a nack", got)
	}
	ticks(b, 1)
	b.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(b.Ready().Messages); !slices.Equal(got, []string{"promise→9:5"}) {
		t.Errorf("Prepare after the lease: got %v, want a promise", got)
	}
}

// A restarted acceptor that may have granted a lease it no longer
// remembers waits one lease before promising, unless its disk says it
// never accepted a proposal.
func TestRestartedAcceptorWaits(t *testing.T) {
	held := election.HardState{Term: 4, MaxTerm: 4, Acceptor: election.AcceptorState{Promised: 4, Accepted: 4, Value: 8}}
	a := newNode(t, 2, held)
	a.Start()
	a.Ready()
	ticks(a, timing.LeaseTicks)
	a.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"nack→9:4"}) {
		t.Errorf("restarted, within a lease: got %v, want a nack", got)
	}
	ticks(a, 1)
	a.Step(msg(protocol.TypePrepare, 9, 0, 10))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"promise→9:10"}) {
		t.Errorf("restarted, a lease later: got %v, want a promise", got)
	}

	promisedOnly := election.HardState{Term: 4, MaxTerm: 4, Acceptor: election.AcceptorState{Promised: 4}}
	b := newNode(t, 4, promisedOnly)
	b.Start()
	b.Ready()
	b.Step(msg(protocol.TypePrepare, 9, 0, 10))
	if got := show(b.Ready().Messages); !slices.Equal(got, []string{"promise→9:10"}) {
		t.Errorf("restarted, nothing ever accepted: got %v, want a promise at once", got)
	}
}

// A leader that leaves (SIGTERM) stops leading, then releases its lease:
// the acceptors promise a successor at once.
func TestResignReleasesLease(t *testing.T) {
	m := elect(t)
	m.Resign()
	rd := m.Ready()
	if m.Status().Role == election.Leader {
		t.Fatalf("after Resign: still leader")
	}
	if got := show(rd.Messages); !slices.Equal(got, []string{"resign:5"}) {
		t.Fatalf("Resign: got %v, want [resign:5]", got)
	}
	a := newNode(t, 2, election.HardState{})
	a.Start()
	a.Ready()
	p := msg(protocol.TypePropose, 9, 0, 5)
	p.Seq = 1
	a.Step(p)
	a.Ready()
	resign := rd.Messages[0]
	resign.Inc = p.Inc // the same process, as the runtime stamps it
	a.Step(resign)
	a.Ready()
	a.Step(msg(protocol.TypePrepare, 8, 0, 9))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"promise→8:9"}) {
		t.Errorf("Prepare after the release: got %v, want a promise at once", got)
	}
}

// The highest live ID leads when nothing is wrong: a leader that hears a
// higher node campaign stops leading, then releases its lease.
func TestHandOverToHigherNode(t *testing.T) {
	m := newNode(t, 8, election.HardState{})
	m.Start()
	m.Ready()
	ticks(m, 2*timing.AnswerTicks) // it defers for 9, which might be up
	for _, id := range []uint64{2, 4} {
		m.Step(msg(protocol.TypePromise, id, 8, 4))
	}
	rd := m.Ready()
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 8, 4)
		a.Seq = rd.Messages[0].Seq
		m.Step(a)
	}
	m.Ready()
	if m.Status().Role != election.Leader {
		t.Fatalf("setup: node 8 not leader: %+v", m.Status())
	}
	m.Step(msg(protocol.TypePrepare, 9, 0, 5))
	rd = m.Ready()
	if m.Status().Role == election.Leader {
		t.Fatalf("after a higher node's Prepare: still leader")
	}
	if got := show(rd.Messages); !slices.Equal(got, []string{"nack→9:4", "resign:4"}) || rd.Messages[1].Candidate != 9 {
		t.Errorf("hand-over: got %+v, want [nack→9:4 resign:4] naming 9", rd.Messages)
	}
}

// A lower candidate told that a higher node holds a lease backs off; told
// that a lower one does, it tries again when that lease ends at the
// latest.
// campaigning returns node id once it has started campaigning: after
// deferring for the higher members that might be up.
func campaigning(t *testing.T, id uint64) *Machine {
	t.Helper()
	m := newNode(t, id, election.HardState{})
	m.Start()
	for range 10 * timing.AnswerTicks {
		if m.phase == preparing {
			break
		}
		m.Tick()
	}
	if m.phase != preparing {
		t.Fatalf("node %d never campaigned", id)
	}
	m.Ready()
	return m
}

func TestCandidateBacksOff(t *testing.T) {
	m := campaigning(t, 4)
	nack := msg(protocol.TypeNack, 2, 4, 0)
	nack.Term, nack.Candidate, nack.Wait = 0, 9, 7
	nack.Term = 1
	m.Step(nack)
	if m.phase != idle || m.wait != timing.CoordinatorTicks {
		t.Errorf("nack naming a higher holder: phase %v wait %d, want idle, waiting %d", m.phase, m.wait, timing.CoordinatorTicks)
	}
	m = campaigning(t, 8)
	nack.To, nack.Candidate = 8, 2
	m.Step(nack)
	if m.phase != preparing || m.wait != 8 {
		t.Errorf("nack naming a lower holder: phase %v wait %d, want still preparing, retry in 8", m.phase, m.wait)
	}
}

// A side of a partition without a majority never elects.
func TestMinorityNeverLeads(t *testing.T) {
	m := newNode(t, 9, election.HardState{})
	m.Start()
	m.Ready()
	m.Step(msg(protocol.TypePromise, 2, 9, 5)) // two promises of five
	for range 10 * timing.CoordinatorTicks {
		m.Tick()
		for _, out := range m.Ready().Messages {
			if out.Type == protocol.TypePrepare {
				m.Step(protocol.Message{V: protocol.Version, Type: protocol.TypePromise, From: 2, To: 9, Term: out.Term})
			}
		}
		if m.Status().Role == election.Leader {
			t.Fatalf("leader with two of five members")
		}
	}
}

// A node whose storage is new may be a replacement that lost what it
// granted: it waits a lease before promising, like a restarted acceptor.
func TestNewStorageWaits(t *testing.T) {
	m, err := New(election.Config{ID: 2, Members: members, Timing: timing, Incarnation: 7})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	m.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"nack→9:5"}) {
		t.Errorf("new storage, at once: got %v, want a nack that remembers ballot 5", got)
	}
	// It accepts nothing either while it waits, and remembers the ballot.
	p := msg(protocol.TypePropose, 8, 0, 4)
	p.Seq = 1
	m.Step(p)
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"nack→8:5"}) {
		t.Errorf("new storage, a proposal at once: got %v, want a nack", got)
	}
	ticks(m, timing.LeaseTicks+1)
	m.Step(msg(protocol.TypePrepare, 9, 0, 10))
	if got := show(m.Ready().Messages); !slices.Equal(got, []string{"promise→9:10"}) {
		t.Errorf("new storage, a lease later: got %v, want a promise", got)
	}
}

// Connection events: when the leader's connection closes, the highest live
// node campaigns at once instead of after the leader time-out; the
// acceptors' grants still decide when it can lead.
func TestLeaderDownCampaignsAtOnce(t *testing.T) {
	m := newNode(t, 8, election.HardState{})
	m.Start()
	ticks(m, timing.LeaseTicks+2) // past its own wait as a new node
	p := msg(protocol.TypePropose, 9, 0, 5)
	p.Seq, p.Candidate = 3, 9
	m.Step(p)
	m.Ready()
	if m.Status().Leader != 9 {
		t.Fatalf("setup: leader %d, want 9", m.Status().Leader)
	}
	m.PeerDown(9)
	rd := m.Ready()
	if got := show(rd.Messages); len(got) != 1 || !strings.HasPrefix(got[0], "prepare:") {
		t.Fatalf("the leader's connection closed: got %v, want a Prepare at once", got)
	}
	if m.Status().Leader != 0 {
		t.Errorf("leader after its disconnect: got %d, want undefined", m.Status().Leader)
	}
	// Its own acceptor still holds the grant to 9: no self-promise yet.
	if len(m.promises) != 0 {
		t.Errorf("promises: got %v, want none while the grant to 9 holds", m.promises)
	}
}

// A node that starts and finds a live leader with a higher ID follows it
// without campaigning; it suspects it only if its renewals stop.
func TestStartFollowsFoundLeader(t *testing.T) {
	m, err := New(election.Config{ID: 4, Members: members, Timing: timing, Restored: true, Incarnation: 104,
		Found: election.Leadership{Leader: 9, Term: 5}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	if got := show(m.Ready().Messages); len(got) != 0 {
		t.Errorf("messages: got %v, want none", got)
	}
	if st := m.Status(); st.Leader != 9 || st.Term != 5 || st.Role != election.Follower {
		t.Errorf("status: got %+v, want a follower of 9 at term 5", st)
	}
	// Renewals of 9 keep it followed; without them, it is suspected.
	for range 3 {
		ticks(m, timing.HeartbeatTicks)
		m.Step(protocol.Message{V: protocol.Version, Type: protocol.TypePropose, From: 9, Term: 5, Candidate: 9, Inc: 109})
		m.Ready()
	}
	if st := m.Status(); st.Leader != 9 {
		t.Errorf("after renewals: leader %d, want 9", st.Leader)
	}
	ticks(m, timing.LeaderTimeoutTicks)
	if st := m.Status(); st.Leader != 0 {
		t.Errorf("after the renewals stopped: leader %d, want none", st.Leader)
	}
}

// A refusal of its Prepare that arrives once a majority has promised (an
// acceptor still waiting a lease after a restart) does not make the
// candidate start over in the middle of Phase 2.
func TestLateNackDoesNotRestartPhase2(t *testing.T) {
	m := newNode(t, 9, election.HardState{})
	m.Start()
	m.Ready()
	for _, id := range []uint64{2, 4} {
		m.Step(msg(protocol.TypePromise, id, 9, 5))
	}
	rd := m.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"propose:5"}) {
		t.Fatalf("with promises from a majority: got %v, want [propose:5]", got)
	}
	seq := rd.Messages[0].Seq
	late := msg(protocol.TypeNack, 6, 9, 0)
	late.Wait = 2
	m.Step(late)
	m.Ready()
	if r := ticks(m, 5); len(r.Messages) != 0 {
		t.Fatalf("after a late refusal of the Prepare: got %v, want the proposal to go on", show(r.Messages))
	}
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 9, 5)
		a.Seq = seq
		m.Step(a)
	}
	if rd := m.Ready(); rd.Claimed != 5 || m.Status().Role != election.Leader {
		t.Errorf("acceptances after the late refusal: claimed %d, status %+v; want leader of term 5", rd.Claimed, m.Status())
	}
}

// Only the process that holds a grant releases it: a Resign with the
// holder's ID from another incarnation (a replacement process stopped
// while the leader runs) leaves the grant, and the acceptor promises no
// one else while it lasts.
func TestResignOfAnotherIncarnationKeepsGrant(t *testing.T) {
	a := newNode(t, 2, election.HardState{})
	a.Start()
	a.Ready()
	p := msg(protocol.TypePropose, 8, 0, 4)
	p.Seq = 1
	a.Step(p)
	a.Ready()
	r := msg(protocol.TypeResign, 8, 0, 4)
	r.Inc = 999 // node 8's ID, another process
	a.Step(r)
	a.Ready()
	a.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"nack→9:4"}) {
		t.Fatalf("Prepare after a Resign from another process of the holder: got %v, want a nack", got)
	}
	a.Step(msg(protocol.TypeResign, 8, 0, 4)) // the holder itself
	a.Ready()
	a.Step(msg(protocol.TypePrepare, 9, 0, 5))
	if got := show(a.Ready().Messages); !slices.Equal(got, []string{"promise→9:5"}) {
		t.Errorf("Prepare after the holder's own Resign: got %v, want a promise", got)
	}
}

// A candidate in Phase 2 does not follow a lower node's Propose of a
// higher ballot (a liar's, which no majority promised): it may still lead
// with its own ballot, and its term must never go backwards.
func TestCandidateKeepsItsTermAgainstLowerPropose(t *testing.T) {
	m := newNode(t, 9, election.HardState{})
	m.Start()
	m.Ready()
	for _, id := range []uint64{2, 4} {
		m.Step(msg(protocol.TypePromise, id, 9, 5))
	}
	rd := m.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"propose:5"}) {
		t.Fatalf("with promises from a majority: got %v, want [propose:5]", got)
	}
	seq := rd.Messages[0].Seq
	lie := msg(protocol.TypePropose, 8, 0, 9) // ballot 9 is node 8's
	lie.Candidate, lie.Seq = 8, 1
	m.Step(lie)
	m.Ready()
	before := m.Status().Term
	for _, id := range []uint64{2, 4} {
		a := msg(protocol.TypeAccepted, id, 9, 5)
		a.Seq = seq
		m.Step(a)
	}
	m.Ready()
	if st := m.Status(); st.Term < before {
		t.Errorf("term went back from %d to %d (status %+v)", before, st.Term, st)
	}
}

// A follower does not give up its leader on a Resign from another process
// with the leader's ID; it does on the leader's own.
func TestFollowerIgnoresResignOfAnotherIncarnation(t *testing.T) {
	f := newNode(t, 2, election.HardState{})
	f.Start()
	f.Ready()
	p := msg(protocol.TypePropose, 9, 0, 5)
	p.Candidate, p.Seq = 9, 1
	f.Step(p)
	f.Ready()
	if f.Status().Leader != 9 {
		t.Fatalf("after 9's renewal: leader %d, want 9", f.Status().Leader)
	}
	r := msg(protocol.TypeResign, 9, 0, 5)
	r.Inc = 999
	f.Step(r)
	if rd := f.Ready(); f.Status().Leader != 9 || len(rd.Messages) != 0 {
		t.Fatalf("after a Resign of another process of 9: leader %d, sent %v; want 9 and nothing", f.Status().Leader, show(rd.Messages))
	}
	f.Step(msg(protocol.TypeResign, 9, 0, 5))
	f.Ready()
	if f.Status().Leader == 9 {
		t.Errorf("after 9's own Resign: still following 9")
	}
}

// A follower follows only a proposal its acceptor accepted: one it refused
// (a ballot below its promise) would raise its term above the ballot of
// the leader it does accept, and nothing would then tell that leader to
// move on.
func TestFollowerFollowsOnlyAcceptedProposals(t *testing.T) {
	f := newNode(t, 2, election.HardState{})
	f.Start()
	f.Ready()
	f.Step(msg(protocol.TypePrepare, 9, 0, 10))
	f.Ready()
	p := msg(protocol.TypePropose, 8, 0, 9) // below the promise of 10
	p.Candidate, p.Seq = 8, 1
	f.Step(p)
	rd := f.Ready()
	if got := show(rd.Messages); !slices.Equal(got, []string{"nack→8:10"}) {
		t.Fatalf("Propose below the promise: got %v, want a nack", got)
	}
	if st := f.Status(); st.Leader == 8 || st.Term == 9 {
		t.Errorf("after a refused Propose: leader %d term %d, want neither 8 nor 9", st.Leader, st.Term)
	}
}

// The acceptor's state is Paxos's own, and the hard state it hands over
// is whole: a restored node stores nothing until something changes, and
// a change of its terms alone still carries the promise and the
// acceptance (writing the terms without them would lose a promise).
func TestReadyCarriesTheWholeHardState(t *testing.T) {
	acc := election.AcceptorState{Promised: 4, Accepted: 4, Value: 8}
	a := newNode(t, 2, election.HardState{Term: 4, MaxTerm: 4, Acceptor: acc})
	if rd := a.Ready(); rd.State != nil {
		t.Fatalf("restored, nothing changed: stored %+v", *rd.State)
	}
	a.Step(msg(protocol.TypeAccepted, 9, 2, 10)) // only teaches term 10
	rd := a.Ready()
	if rd.State == nil || *rd.State != (election.HardState{Term: 4, MaxTerm: 10, Acceptor: acc}) {
		t.Fatalf("after seeing term 10: stored %v, want terms 4, 10 and acceptor %+v", rd.State, acc)
	}
	if rd := a.Ready(); rd.State != nil {
		t.Errorf("unchanged: stored %+v again", *rd.State)
	}
}
