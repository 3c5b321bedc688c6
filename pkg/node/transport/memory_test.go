package transport

import (
	"context"
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
	if claims, others := bLanes.Len(); claims != 1 || others != 1 {
		t.Errorf("claims lane: %d, others lane: %d, want 1 and 1", claims, others)
	}
	if bCounts.received != 2 || bCounts.dropped[ReasonInboxFull] != 1 {
		t.Errorf("received %d, dropped %v; want 2 and one inbox_full", bCounts.received, bCounts.dropped)
	}
	if claims, others := aLanes.Len(); claims+others != 0 {
		t.Errorf("the sender received %d of its own messages, want none", claims+others)
	}
	if err := a.Send(protocol.Message{Type: protocol.TypeElection, From: 1, To: 3}); err != nil {
		t.Fatal(err)
	}
	if in, claim, ok := aLanes.Next(); !ok || claim || in.Kind != Unreachable || in.Peer != 3 {
		t.Errorf("after a message to 3, which is not there: %+v (%t), want 3 unreachable on the others lane", in, ok)
	}
	for _, want := range []bool{true, false} {
		if _, claim, ok := bLanes.Next(); !ok || claim != want {
			t.Fatalf("member 2's next event: found %t, claim %t; want a claim (%t)", ok, claim, want)
		}
	}
	b := n.endpoints[2]
	b.Unread()
	if err := a.Send(protocol.Message{Type: protocol.TypeHeartbeat, From: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := bLanes.Len(); got != 0 {
		t.Fatalf("claims lane while unread: %d, want 0", got)
	}
	b.Settle()
	if got, _ := bLanes.Len(); got != 1 {
		t.Errorf("claims lane after Settle: %d, want 1", got)
	}
}

// A lane keeps its events in order up to its bound and drops beyond it;
// claims come first; the lanes hold memory for what waits, not for their
// bound, and let a burst's buffer go once it is read.
func TestLanes(t *testing.T) {
	c := &counts{dropped: map[protocol.Reason]int{}}
	l := NewLanes(100, c)
	if len(l.claims.buf)+len(l.others.buf) != 0 {
		t.Fatalf("new lanes hold buffers of %d and %d events, want none", len(l.claims.buf), len(l.others.buf))
	}
	for i := range 150 {
		l.Deliver(Inbound{Kind: Unreachable, Peer: uint64(i)})
		if i == 2 {
			// Taken before the others fill the lane: the ring wraps.
			if in, _, _ := l.Next(); in.Peer != 0 {
				t.Fatalf("first out: %+v, want peer 0", in)
			}
		}
	}
	l.Deliver(Inbound{Kind: PeerDown, Peer: 999})
	if claims, others := l.Len(); claims != 1 || others != 100 {
		t.Fatalf("lanes hold %d claims and %d others, want 1 and 100", claims, others)
	}
	if c.dropped[ReasonInboxFull] != 49 {
		t.Errorf("dropped %d, want 49", c.dropped[ReasonInboxFull])
	}
	select {
	case <-l.Ready():
	default:
		t.Fatal("nothing ready after deliveries")
	}
	if in, claim, ok := l.Next(); !ok || !claim || in.Peer != 999 {
		t.Fatalf("first out: %+v, claim %t; want the claim", in, claim)
	}
	for want := uint64(1); want <= 100; want++ {
		in, claim, ok := l.Next()
		if !ok || claim || in.Peer != want {
			t.Fatalf("out of order: %+v (claim %t, %t), want peer %d", in, claim, ok, want)
		}
	}
	if _, _, ok := l.Next(); ok {
		t.Fatal("an event beyond those delivered")
	}
	// An event taken without waiting for its notification (the loop takes
	// what is queued after each event): once the lanes are found empty,
	// no notification is left.
	l.Deliver(Inbound{Kind: Unreachable, Peer: 6})
	if in, _, ok := l.Next(); !ok || in.Peer != 6 {
		t.Fatalf("next: %+v (%t), want peer 6", in, ok)
	}
	if _, _, ok := l.Next(); ok {
		t.Fatal("an event beyond those delivered")
	}
	select {
	case <-l.Ready():
		t.Error("a notification left after every event was taken: the reader would wake for nothing")
	default:
	}
	l.Deliver(Inbound{Kind: Unreachable, Peer: 7})
	select {
	case <-l.Ready():
	default:
		t.Error("no notification for an event queued after the lanes were emptied")
	}
	if in, _, ok := l.Next(); !ok || in.Peer != 7 {
		t.Fatalf("after the lanes were emptied: %+v (%t), want peer 7", in, ok)
	}
	if len(l.others.buf) > laneKeep {
		t.Errorf("an emptied lane keeps a buffer of %d events, want at most %d", len(l.others.buf), laneKeep)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := l.Wait(ctx); err == nil {
		t.Error("Wait on empty lanes with an ended context returned an event")
	}
}
