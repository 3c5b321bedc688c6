package leader

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

func decision(member, term, seq uint64, value string) protocol.Decision {
	return protocol.Decision{Cluster: "default", Term: term, Seq: seq, Value: value, Member: member}
}

// f+1 = 2 distinct members must sign one value; copies, a member's
// second value, and replays after the yield do not count.
func TestTallyNeedsFPlusOneDistinctMembers(t *testing.T) {
	tl := newTally(2)
	steps := []struct {
		d    protocol.Decision
		want bool
	}{
		{decision(3, 7, 1, "retreat"), false}, // the liar alone
		{decision(3, 7, 1, "retreat"), false}, // its copy
		{decision(3, 7, 1, "attack"), false},  // its second value: the first counts
		{decision(1, 7, 1, "attack"), false},
		{decision(2, 7, 1, "attack"), true},
		{decision(4, 7, 1, "attack"), false}, // yielded already
		{decision(1, 7, 1, "attack"), false}, // a replay
	}
	for i, s := range steps {
		o, ok := tl.add(s.d)
		if ok != s.want {
			t.Fatalf("step %d, %+v: yielded %v; want %v", i, s.d, ok, s.want)
		}
		if ok && (o.Value != "attack" || !slices.Equal(o.Members, []uint64{1, 2}) || o.Term != 7 || o.Seq != 1) {
			t.Errorf("yielded %+v; want attack by members [1 2] for 7/1", o)
		}
	}
}

// A liar that signs decisions of orders nobody issued pushes out only
// its own: the tally keeps at most maxVotesPerMember of them, and an
// honest order is still yielded.
func TestTallyBoundsALiar(t *testing.T) {
	tl := newTally(2)
	tl.add(decision(1, 7, 1, "attack"))
	for seq := uint64(100); seq < 100+10*maxVotesPerMember; seq++ {
		if _, ok := tl.add(decision(3, 7, seq, "junk")); ok {
			t.Fatalf("the liar alone made order %d", seq)
		}
	}
	if n := len(tl.votes[3]); n != maxVotesPerMember {
		t.Errorf("the liar has %d decisions counted; want at most %d", n, maxVotesPerMember)
	}
	if n := len(tl.orders); n != maxVotesPerMember+1 {
		t.Errorf("%d orders tracked; want %d", n, maxVotesPerMember+1)
	}
	if o, ok := tl.add(decision(2, 7, 1, "attack")); !ok || o.Value != "attack" {
		t.Errorf("the honest order: %+v, %v; want attack yielded", o, ok)
	}
}

// Once more than maxYielded orders were yielded, the oldest is forgotten
// and no order up to it is yielded again.
func TestTallyForgetsOldOrdersWithoutYieldingThemAgain(t *testing.T) {
	tl := newTally(1)
	for seq := uint64(1); seq <= maxYielded+1; seq++ {
		if _, ok := tl.add(decision(1, 7, seq, "v")); !ok {
			t.Fatalf("order %d not yielded", seq)
		}
	}
	if len(tl.yielded) != maxYielded {
		t.Errorf("%d orders remembered; want %d", len(tl.yielded), maxYielded)
	}
	if _, ok := tl.add(decision(2, 7, 1, "v")); ok {
		t.Error("the forgotten order 1 was yielded again")
	}
}
