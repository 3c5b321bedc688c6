// Package transporttest is the contract of transport.Transport: one suite
// of tests that every adapter runs (the in-memory network of package
// transport and the NATS adapter of package natstransport), so that the
// runtime's tests on the in-memory network hold for the node on NATS.
package transporttest

import (
	"context"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// Network makes the transports of the members of one cluster.
type Network interface {
	// Join returns member id's transport, not connected yet.
	Join(t *testing.T, id uint64) transport.Transport
}

// Members are the members of the suite's cluster.
var Members = []uint64{1, 2, 3}

// Wait bounds every wait of the suite for something to arrive.
const Wait = 5 * time.Second

// Run runs the suite: newNetwork returns a fresh network of a cluster of
// Members for each test.
func Run(t *testing.T, newNetwork func(t *testing.T) Network) {
	t.Run("broadcast reaches every other member", func(t *testing.T) { broadcast(t, newNetwork(t)) })
	t.Run("point-to-point reaches its receiver alone", func(t *testing.T) { pointToPoint(t, newNetwork(t)) })
	t.Run("claims travel on their own lane", func(t *testing.T) { lanes(t, newNetwork(t)) })
	t.Run("close ends the transport", func(t *testing.T) { closing(t, newNetwork(t)) })
	t.Run("a message to a member gone comes back unreachable", func(t *testing.T) { unreachable(t, newNetwork(t)) })
}

// member is one member's transport, connected and open.
type member struct {
	id    uint64
	tr    transport.Transport
	lanes *transport.Lanes
	inc   uint64
	n     uint64
}

type meter struct{}

func (meter) Received(protocol.Type)  {}
func (meter) Dropped(protocol.Reason) {}

// start connects and opens member id's transport.
func start(t *testing.T, net Network, id uint64) *member {
	t.Helper()
	m := &member{id: id, tr: net.Join(t, id), lanes: transport.NewLanes(64, meter{}), inc: uint64(time.Now().UnixNano())}
	t.Cleanup(m.tr.Abort)
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := m.tr.Connect(ctx, m.lanes); err != nil {
		t.Fatalf("member %d: Connect: %v", id, err)
	}
	if err := m.tr.Open(transport.Self{Incarnation: m.inc, Started: time.Now().Add(-time.Second)}); err != nil {
		t.Fatalf("member %d: Open: %v", id, err)
	}
	return m
}

// startAll starts every member.
func startAll(t *testing.T, net Network) map[uint64]*member {
	t.Helper()
	ms := map[uint64]*member{}
	for _, id := range Members {
		ms[id] = start(t, net, id)
	}
	return ms
}

// send sends msg from m, stamped as a node's driver stamps it.
func (m *member) send(t *testing.T, msg protocol.Message) protocol.Message {
	t.Helper()
	m.n++
	msg.V, msg.From, msg.Inc, msg.N, msg.TS = protocol.Version, m.id, m.inc, m.n, time.Now().UnixMilli()
	if err := m.tr.Send(msg); err != nil {
		t.Fatalf("member %d: Send(%v): %v", m.id, msg, err)
	}
	return msg
}

// receive waits for the next Inbound of m on either lane.
func (m *member) receive(t *testing.T) (transport.Inbound, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	in, claim, err := m.lanes.Wait(ctx)
	if err != nil {
		t.Fatalf("member %d received nothing within %s", m.id, Wait)
	}
	return in, claim
}

// expect waits for msg at m, the next thing to arrive there.
func (m *member) expect(t *testing.T, msg protocol.Message) (claim bool) {
	t.Helper()
	in, claim := m.receive(t)
	if in.Kind != transport.Message || in.Msg.Type != msg.Type || in.Msg.From != msg.From || in.Msg.Term != msg.Term || in.Msg.To != msg.To || in.Msg.N != msg.N {
		t.Fatalf("member %d received %+v, want %v", m.id, in, msg)
	}
	if in.At.IsZero() {
		t.Errorf("member %d: %v arrived without its time of arrival", m.id, msg)
	}
	return claim
}

// quiet checks that nothing more is on m's lanes once what the network
// delivered to it is there (Settle).
func (m *member) quiet(t *testing.T) {
	t.Helper()
	m.tr.Settle()
	if in, _, ok := m.lanes.Next(); ok {
		t.Errorf("member %d received %+v, want nothing", m.id, in)
	}
}

func broadcast(t *testing.T, net Network) {
	ms := startAll(t, net)
	sent := ms[1].send(t, protocol.Message{Type: protocol.TypeElection, Term: 7})
	ms[2].expect(t, sent)
	ms[3].expect(t, sent)
	ms[1].quiet(t)
}

func pointToPoint(t *testing.T, net Network) {
	ms := startAll(t, net)
	sent := ms[1].send(t, protocol.Message{Type: protocol.TypeAnswer, To: 2, Term: 7})
	ms[2].expect(t, sent)
	ms[3].quiet(t)
	ms[1].quiet(t)
}

func lanes(t *testing.T, net Network) {
	ms := startAll(t, net)
	claim := ms[1].send(t, protocol.Message{Type: protocol.TypeHeartbeat, Term: 7})
	if !ms[2].expect(t, claim) {
		t.Errorf("a heartbeat arrived on the others' lane, want the claims'")
	}
	other := ms[1].send(t, protocol.Message{Type: protocol.TypeElection, Term: 7})
	if ms[2].expect(t, other) {
		t.Errorf("an election arrived on the claims' lane, want the others'")
	}
}

func closing(t *testing.T, net Network) {
	ms := startAll(t, net)
	m := ms[3]
	m.tr.Close()
	m.tr.Close() // idempotent
	m.tr.Abort()
	select {
	case <-m.tr.Closed():
	case <-time.After(Wait):
		t.Fatalf("Closed still open %s after Close", Wait)
	}
	if m.tr.Connected() {
		t.Errorf("Connected after Close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := m.tr.Connect(ctx, m.lanes); err != transport.ErrClosed {
		t.Errorf("Connect after Close = %v, want transport.ErrClosed", err)
	}
	// The others go on without it.
	sent := ms[1].send(t, protocol.Message{Type: protocol.TypeElection, Term: 8})
	ms[2].expect(t, sent)
	m.quiet(t)
}

func unreachable(t *testing.T, net Network) {
	ms := startAll(t, net)
	ms[3].tr.Close()
	ms[1].send(t, protocol.Message{Type: protocol.TypeAnswer, To: 3, Term: 7})
	in, _ := ms[1].receive(t)
	if in.Kind != transport.Unreachable || in.Peer != 3 || in.At.IsZero() {
		t.Fatalf("member 1 received %+v, want member 3 unreachable", in)
	}
	// A receiver that is there is not unreachable.
	sent := ms[1].send(t, protocol.Message{Type: protocol.TypeAnswer, To: 2, Term: 7})
	ms[2].expect(t, sent)
	ms[1].quiet(t)
}
