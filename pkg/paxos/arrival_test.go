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
