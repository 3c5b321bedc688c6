package transport

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// Network is an in-memory network of Endpoints, for testing the runtime
// without a NATS server. Sending delivers at once, in the sender's
// goroutine, to the receivers' lanes; it starts no goroutine, so inside a
// testing/synctest bubble the nodes' timing is deterministic. It checks
// nothing: what a member sends arrives as sent. A point-to-point message
// to a member with no open endpoint comes back as Unreachable. Queries are
// answered by every endpoint that leads (Query); there is no stream.
type Network struct {
	mu        sync.Mutex
	endpoints map[uint64]*Endpoint // open ones, by member
	observers []func(Packet)
}

// Packet is what an endpoint sent: a message or an announcement.
type Packet struct {
	From         *Endpoint
	Msg          protocol.Message
	Announcement *protocol.Announcement // nil for a message
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{endpoints: make(map[uint64]*Endpoint)} }

// Observe calls f with every packet sent on the network, in the sender's
// goroutine, before any receiver has it. f must not send.
func (n *Network) Observe(f func(Packet)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.observers = append(n.observers, f)
}

// Join returns the endpoint of member id, open until closed.
func (n *Network) Join(id uint64) *Endpoint {
	return &Endpoint{net: n, id: id, closed: make(chan struct{})}
}

// Query returns the answers of every endpoint that leads now.
func (n *Network) Query() []protocol.Announcement {
	n.mu.Lock()
	defer n.mu.Unlock()
	var answers []protocol.Announcement
	for _, id := range slices.Sorted(maps.Keys(n.endpoints)) {
		e := n.endpoints[id]
		if e.leads != nil && (e.until.IsZero() || time.Now().Before(e.until)) {
			answers = append(answers, *e.leads)
		}
	}
	return answers
}

// Endpoint is one member's Transport on a Network. It is also what the
// member asks its cluster as it starts (node.TermSource).
type Endpoint struct {
	net    *Network
	id     uint64
	closed chan struct{}

	// Guarded by net.mu.
	lanes    *Lanes
	open     bool          // receiving (Open) and not closed
	done     bool          // closed
	hold     chan struct{} // while sending is held: closed on release
	unread   bool          // while messages to it wait for its next Settle
	socket   []Inbound     // what waits, in order
	leads    *protocol.Announcement
	until    time.Time
	watchers map[chan<- struct{}]struct{}
}

var _ Transport = (*Endpoint)(nil)

// Hold makes every Send and Announce of e wait until Release (or Close):
// a connection whose writes are stuck, whose node therefore stalls in its
// loop while messages to it go on arriving.
func (e *Endpoint) Hold() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.hold == nil {
		e.hold = make(chan struct{})
	}
}

// Release ends Hold.
func (e *Endpoint) Release() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.hold != nil {
		close(e.hold)
		e.hold = nil
	}
}

// Unread makes what is sent to e wait, as if unread in its socket, until
// its next Settle, or Read.
func (e *Endpoint) Unread() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.unread = true
}

// Read delivers what waits unread and ends Unread.
func (e *Endpoint) Read() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.unread = false
	e.flushLocked()
}

func (e *Endpoint) flushLocked() {
	for _, in := range e.socket {
		e.lanes.Deliver(in)
	}
	e.socket = nil
}

// Connect implements Transport.
func (e *Endpoint) Connect(ctx context.Context, in *Lanes) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.done {
		return ErrClosed
	}
	e.lanes = in
	return ctx.Err()
}

// Open starts receiving.
func (e *Endpoint) Open(Self) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.done {
		return ErrClosed
	}
	e.open = true
	e.net.endpoints[e.id] = e
	return nil
}

// Send delivers m to its receiver, or to every other open endpoint.
func (e *Endpoint) Send(m protocol.Message) error {
	return e.send(Packet{From: e, Msg: m})
}

// Announce shows a to the network's observers.
func (e *Endpoint) Announce(a protocol.Announcement) {
	e.send(Packet{From: e, Announcement: &a})
}

func (e *Endpoint) send(p Packet) error {
	if err := e.wait(); err != nil {
		return err
	}
	n := e.net
	n.mu.Lock()
	observers := n.observers
	n.mu.Unlock()
	for _, f := range observers {
		f(p)
	}
	if p.Announcement != nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if to := p.Msg.To; to != 0 {
		if r := n.endpoints[to]; r != nil {
			r.receiveLocked(Inbound{Kind: Message, Msg: p.Msg, At: now})
		} else if e.lanes != nil {
			e.lanes.Deliver(Inbound{Kind: Unreachable, Peer: to, At: now})
		}
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(n.endpoints)) { // in one order, run after run
		if id != e.id {
			n.endpoints[id].receiveLocked(Inbound{Kind: Message, Msg: p.Msg, At: now})
		}
	}
	return nil
}

// wait returns once e may send: at once unless held.
func (e *Endpoint) wait() error {
	e.net.mu.Lock()
	hold, done := e.hold, e.done
	e.net.mu.Unlock()
	if done {
		return ErrClosed
	}
	if hold != nil {
		select {
		case <-hold:
		case <-e.closed:
			return ErrClosed
		}
	}
	return nil
}

func (e *Endpoint) receiveLocked(in Inbound) {
	if e.unread {
		e.socket = append(e.socket, in)
		return
	}
	e.lanes.Deliver(in)
}

// Back tells e's node that member id may have missed what it sent
// (PeerBack), as the NATS adapter does when a member beats again after
// it fell silent.
func (e *Endpoint) Back(id uint64) {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.open {
		e.receiveLocked(Inbound{Kind: PeerBack, Peer: id, At: time.Now()})
	}
}

// Lead sets what Query answers for e.
func (e *Endpoint) Lead(a *protocol.Announcement, until time.Time) {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.leads, e.until = a, until
}

// Settle delivers what waits unread.
func (e *Endpoint) Settle() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.flushLocked()
}

// Connected reports whether e is not closed.
func (e *Endpoint) Connected() bool {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	return !e.done
}

// Closed implements Transport.
func (e *Endpoint) Closed() <-chan struct{} { return e.closed }

// Watch implements Transport: e changes only when it closes.
func (e *Endpoint) Watch(ch chan<- struct{}) (stop func()) {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.watchers == nil {
		e.watchers = make(map[chan<- struct{}]struct{})
	}
	e.watchers[ch] = struct{}{}
	return func() {
		e.net.mu.Lock()
		defer e.net.mu.Unlock()
		delete(e.watchers, ch)
	}
}

// Close leaves the network: nothing reaches e any more.
func (e *Endpoint) Close() { e.Abort() }

// Abort implements Transport; it is Close.
func (e *Endpoint) Abort() {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	if e.done {
		return
	}
	e.done, e.open, e.leads = true, false, nil
	if e.net.endpoints[e.id] == e {
		delete(e.net.endpoints, e.id)
	}
	close(e.closed)
	for ch := range e.watchers {
		Notify(ch)
	}
}

// Leader asks the endpoints that lead (Query) and returns the answer of
// the highest term.
func (e *Endpoint) Leader(ctx context.Context) (protocol.Announcement, error) {
	var best protocol.Announcement
	for _, a := range e.net.Query() {
		if a.Term > best.Term {
			best = a
		}
	}
	if best.Leader == 0 {
		return best, errNoLeader
	}
	return best, ctx.Err()
}

// LastAnnounced finds nothing: the network has no stream.
func (e *Endpoint) LastAnnounced(context.Context) (protocol.Announcement, error) {
	return protocol.Announcement{}, errNoStream
}

var (
	errNoLeader = errors.New("transport: no leader answered")
	errNoStream = errors.New("transport: no stream on an in-memory network")
)
