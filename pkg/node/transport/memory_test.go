package transport

import (
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

type counts struct {
	received int
	dropped  map[protocol.Reason]int
}

func (c *counts) Received(protocol.Type)    { c.received++ }
func (c *counts) Dropped(r protocol.Reason) { c.dropped[r]++ }

func join(t *testing.T, n *Network, id uint64, size int) (*Endpoint, *Lanes, *counts) {
	t.Helper()
	c := &counts{dropped: map[protocol.Reason]int{}}
	lanes := NewLanes(size, c)
	e := n.Join(id)
	if err := e.Connect(t.Context(), lanes); err != nil {
		t.Fatal(err)
	}
	if err := e.Open(Self{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, lanes, c
}

// Claims and the rest travel apart; a full lane drops and counts; a
// message to a member without an open endpoint comes back unreachable;
// what waits unread arrives at Settle.
func TestNetwork(t *testing.T) {
	n := NewNetwork()
	a, aLanes, _ := join(t, n, 1, 1)
	_, bLanes, bCounts := join(t, n, 2, 1)
	for _, m := range []protocol.Message{
		{Type: protocol.TypeHeartbeat, From: 1},
		{Type: protocol.TypeElection, From: 1},
		{Type: protocol.TypeElection, From: 1}, // the lane holds one
	} {
		if err := a.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(bLanes.Claims()); got != 1 {
		t.Errorf("claims lane: %d, want 1", got)
	}
	if got := len(bLanes.Others()); got != 1 {
		t.Errorf("others lane: %d, want 1", got)
	}
	if bCounts.received != 2 || bCounts.dropped[ReasonInboxFull] != 1 {
		t.Errorf("received %d, dropped %v; want 2 and one inbox_full", bCounts.received, bCounts.dropped)
	}
	if got := len(aLanes.Others()) + len(aLanes.Claims()); got != 0 {
		t.Errorf("the sender received %d of its own messages, want none", got)
	}
	if err := a.Send(protocol.Message{Type: protocol.TypeElection, From: 1, To: 3}); err != nil {
		t.Fatal(err)
	}
	if in := <-aLanes.Others(); in.Kind != Unreachable || in.Peer != 3 {
		t.Errorf("after a message to 3, which is not there: %+v, want 3 unreachable", in)
	}
	<-bLanes.Claims()
	<-bLanes.Others()
	b := n.endpoints[2]
	b.Unread()
	if err := a.Send(protocol.Message{Type: protocol.TypeHeartbeat, From: 1}); err != nil {
		t.Fatal(err)
	}
	if got := len(bLanes.Claims()); got != 0 {
		t.Fatalf("claims lane while unread: %d, want 0", got)
	}
	b.Settle()
	if got := len(bLanes.Claims()); got != 1 {
		t.Errorf("claims lane after Settle: %d, want 1", got)
	}
}
