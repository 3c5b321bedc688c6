package core

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestPresence(t *testing.T) {
	timing := election.DefaultTiming(3)
	limit := uint64(election.MemberTimeoutFactor * timing.PresenceTicks)
	p := NewPresence(5, []uint64{5, 9}, timing, 0)
	if got := p.Members(); !slices.Equal(got, []uint64{5, 9}) {
		t.Fatalf("members at start %v, want [5 9]", got)
	}
	joined, answer := p.Heard(3, 1, 10, true)
	if !joined || !answer {
		t.Fatalf("first presence of 3: joined %t answer %t, want both", joined, answer)
	}
	before := p.Members()
	if joined, answer = p.Heard(3, 1, 20, true); joined || answer {
		t.Fatalf("second presence of the same incarnation: joined %t answer %t, want neither", joined, answer)
	}
	if _, answer = p.Heard(3, 2, 30, true); !answer {
		t.Fatal("a new incarnation's presence is not answered")
	}
	if !slices.Equal(before, []uint64{3, 5, 9}) {
		t.Fatalf("members %v, want [3 5 9]", before)
	}
	// 9 was heard at 0, 3 at 30: 9 times out first, 3 later.
	if gone := p.Expire(limit - 1); gone != nil {
		t.Fatalf("expired %v before the time-out", gone)
	}
	if gone := p.Expire(limit); !slices.Equal(gone, []uint64{9}) {
		t.Fatalf("expired %v at %d, want [9]", gone, limit)
	}
	if d := p.Due(limit); d != 30 {
		t.Fatalf("due %d, want 30", d)
	}
	if !slices.Equal(before, []uint64{3, 5, 9}) {
		t.Fatal("a list handed out was changed")
	}
	if !p.Left(3) || p.Left(3) {
		t.Fatal("Left(3) must report true once")
	}
	if got := p.Members(); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("members %v, want [5]", got)
	}
	if d := p.Due(limit); d != 1<<30 {
		t.Fatalf("due %d with nobody present, want never", d)
	}
	if joined, _ := p.Heard(5, 1, 40, true); joined {
		t.Fatal("a node joined itself")
	}
}

func TestPresenceBound(t *testing.T) {
	p := NewPresence(1, nil, election.DefaultTiming(3), 0)
	for id := uint64(2); id <= election.MaxDynamicMembers+10; id++ {
		p.Heard(id, 1, 1, true)
	}
	if n := len(p.Members()); n != election.MaxDynamicMembers {
		t.Fatalf("%d members, want the bound %d", n, election.MaxDynamicMembers)
	}
	if p.Present(election.MaxDynamicMembers + 5) {
		t.Fatal("a member beyond the bound counts as present")
	}
}

// TestDynamicTerms checks that with dynamic membership a term belongs to
// the member of its ID, whatever the members present: two members that
// claim never claim the same term.
func TestDynamicTerms(t *testing.T) {
	newCore := func(id uint64, known ...uint64) *Core {
		c, err := NewCore(election.Config{ID: id, Members: append(known, id), Dynamic: true, Timing: election.DefaultTiming(3)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newCore(7), newCore(300, 7, 12)
	for range 3 {
		ta, tb := a.NewBallot(), b.NewBallot()
		if a.Owner(ta) != 7 || b.Owner(tb) != 300 || ta == tb {
			t.Fatalf("terms %d (owner %d) and %d (owner %d)", ta, a.Owner(ta), tb, b.Owner(tb))
		}
		a.Receive(protocol.Message{Type: protocol.TypePresence, From: 300, Term: tb})
		b.Receive(protocol.Message{Type: protocol.TypePresence, From: 7, Term: ta})
	}
	if got := a.Members(); !slices.Equal(got, []uint64{7, 300}) {
		t.Fatalf("a's members %v, want [7 300]", got)
	}
	rd := a.Ready()
	var answered, joined int
	for _, m := range rd.Messages {
		if m.Type == protocol.TypePresence && m.To == 300 {
			answered++
		}
	}
	for _, e := range rd.Events {
		if e.Kind == election.MemberJoined && e.Member == 300 {
			joined++
		}
	}
	if answered != 1 || joined != 1 {
		t.Fatalf("a answered 300 %d times and reported its join %d times, want once each", answered, joined)
	}
	a.PeerDown(300)
	if got := a.Members(); !slices.Equal(got, []uint64{7}) {
		t.Fatalf("a's members after 300's connection closed: %v, want [7]", got)
	}
}

// TestNewcomerAnsweredOnItsFirstBroadcast: a newcomer's Election, sent
// beside its presence, may arrive first, and its presence is then
// dropped as a number already passed; the Election is answered all the
// same, so the newcomer learns who is present.
func TestNewcomerAnsweredOnItsFirstBroadcast(t *testing.T) {
	c, err := NewCore(election.Config{ID: 3, Members: []uint64{3}, Dynamic: true, Timing: election.DefaultTiming(3)})
	if err != nil {
		t.Fatal(err)
	}
	c.Receive(protocol.Message{Type: protocol.TypeElection, From: 9, Inc: 1, N: 2})
	c.Receive(protocol.Message{Type: protocol.TypeHeartbeat, From: 9, Inc: 1, N: 3, Term: 9})
	var answers int
	for _, m := range c.Ready().Messages {
		if m.Type == protocol.TypePresence && m.To == 9 {
			answers++
		}
	}
	if answers != 1 {
		t.Fatalf("%d presence answers to the newcomer, want 1", answers)
	}
}

// TestHandOverShowsPresence: a Paxos leader handing over to a newcomer
// broadcasts a Resign naming it, which the newcomer may read before that
// leader's answer to its presence (then dropped as a number already
// passed): the hand-over shows the leader present, as any message does,
// and a Resign that names nobody is a departure.
func TestHandOverShowsPresence(t *testing.T) {
	c, err := NewCore(election.Config{ID: 5, Members: []uint64{5}, Dynamic: true, Timing: election.DefaultTiming(3)})
	if err != nil {
		t.Fatal(err)
	}
	c.Receive(protocol.Message{Type: protocol.TypeResign, From: 4, Candidate: 5, Inc: 1, N: 57, Term: 3})
	if got := c.Members(); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("members after 4's hand-over: %v, want [4 5]", got)
	}
	c.Receive(protocol.Message{Type: protocol.TypeResign, From: 7, Inc: 1, N: 3, Term: 3})
	if got := c.Members(); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("members after 7's resignation: %v, want [4 5]", got)
	}
}
