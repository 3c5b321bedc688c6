// Package nodetest is an in-memory NATS network for testing pkg/node
// without sockets: every Conn it makes is a node.Transport.
//
// It keeps the NATS semantics the node relies on: subjects with the
// wildcards * (one token) and > (one or more tokens at the end); one
// delivery goroutine per subscription calling its handler one message at
// a time; bounded pending messages and bytes per subscription, beyond
// which messages are dropped and counted; a reply with the header
// Status: 503 on the reply subject of a message that no subscription
// receives ("no responders"); request and reply; no echo (a connection
// does not receive what it publishes, as the node service connects);
// Drain, which delivers what is pending and then closes; Close, after
// which the connection reports the status CLOSED. Publishing is
// synchronous up to the subscriptions' queues, so Flush has nothing to
// wait for, unless Unread keeps a connection's messages waiting for its
// next Flush, as unread in its socket. There are no streams: Learn asks
// the current leader only.
//
// Every goroutine belongs to a subscription and returns once it is
// unsubscribed, drained or its connection closed; the network leaves none
// behind once every connection is closed. It works inside a
// testing/synctest bubble, where it makes the node's timing deterministic.
package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// Network is a set of connections that see each other's messages.
type Network struct {
	mu     sync.Mutex
	conns  map[*Conn]struct{}
	next   int
	tap    func(from *Conn, msg *nats.Msg)
	inboxN int
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{conns: make(map[*Conn]struct{})} }

// Tap sets f to be called with every message published on the network,
// synchronously in the publisher's goroutine before anyone receives it;
// nil removes it. f must not publish on the network.
func (n *Network) Tap(f func(from *Conn, msg *nats.Msg)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tap = f
}

// Connect returns a new open connection named name.
func (n *Network) Connect(name string) *Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	c := &Conn{
		net:       n,
		name:      name,
		id:        n.next,
		subs:      make(map[*subscription]struct{}),
		listeners: make(map[chan nats.Status]nats.Status),
	}
	n.conns[c] = struct{}{}
	return c
}

// Conn is one connection to a Network. It implements node.Transport.
type Conn struct {
	net  *Network
	name string
	id   int

	// Guarded by net.mu.
	subs      map[*subscription]struct{}
	listeners map[chan nats.Status]nats.Status
	closed    bool
	draining  bool
	hold      chan struct{} // while publishing is held: closed on release
	unread    bool          // while messages to it wait for its next Flush
	socket    []delivery    // what waits, in order; unbounded: a test decides how much it sends while Unread
}

// delivery is a message waiting for its subscription.
type delivery struct {
	s   *subscription
	msg *nats.Msg
}

var _ node.Transport = (*Conn)(nil)

// Name is the connection's name.
func (c *Conn) Name() string { return c.name }

// Hold makes every Publish of c wait until Release (or Close): a
// connection whose writes are stuck, and whose node therefore stalls in
// its loop while its subscriptions go on receiving.
func (c *Conn) Hold() {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.hold == nil {
		c.hold = make(chan struct{})
	}
}

// Unread makes every message to c wait, as if unread in its socket, until
// c's next Flush, or until Read. A NATS server answers a flush only after
// what it sent before, and the client hands that to the handlers: here
// Flush calls the handlers itself, in order, before it returns, so that
// what a flush brings is deterministic (their subscriptions' own queues
// and limits are bypassed for these messages).
func (c *Conn) Unread() {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	c.unread = true
}

// Read ends Unread and hands what waits to the subscriptions.
func (c *Conn) Read() {
	c.net.mu.Lock()
	c.unread = false
	c.net.mu.Unlock()
	c.readSocket(false)
}

// readSocket hands what waits in c's socket to its subscriptions' queues,
// or, now, straight to their handlers.
func (c *Conn) readSocket(now bool) {
	c.net.mu.Lock()
	waiting := c.socket
	c.socket = nil
	c.net.mu.Unlock()
	for _, d := range waiting {
		if now {
			d.s.handler(d.msg)
		} else {
			d.s.enqueue(d.msg)
		}
	}
}

// Release ends Hold.
func (c *Conn) Release() {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
}

// Draining reports whether Drain has started and the connection is not
// closed yet.
func (c *Conn) Draining() bool {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.draining && !c.closed
}

// Subscribe implements node.Transport.
func (c *Conn) Subscribe(subject string, pendingMsgs, pendingBytes int, handler func(*nats.Msg)) (node.Subscription, error) {
	tokens, err := parseSubject(subject, true)
	if err != nil {
		return nil, err
	}
	if handler == nil || pendingMsgs <= 0 || pendingBytes <= 0 {
		return nil, fmt.Errorf("nodetest: subscribe %s: a handler and positive pending limits are required", subject)
	}
	s := &subscription{
		conn:      c,
		tokens:    tokens,
		handler:   handler,
		maxMsgs:   pendingMsgs,
		maxBytes:  pendingBytes,
		accepting: true,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	c.net.mu.Lock()
	if c.closed || c.draining {
		c.net.mu.Unlock()
		return nil, nats.ErrConnectionClosed
	}
	c.subs[s] = struct{}{}
	c.net.mu.Unlock()
	go s.run()
	return s, nil
}

// Publish implements node.Transport. A message with a reply subject that
// no subscription receives gets a "no responders" status on its reply
// subject.
func (c *Conn) Publish(msg *nats.Msg) error {
	if _, err := parseSubject(msg.Subject, false); err != nil {
		return err
	}
	c.net.mu.Lock()
	for c.hold != nil && !c.closed {
		h := c.hold
		c.net.mu.Unlock()
		<-h
		c.net.mu.Lock()
	}
	if c.closed {
		c.net.mu.Unlock()
		return nats.ErrConnectionClosed
	}
	tap := c.net.tap
	c.net.mu.Unlock()
	m := &nats.Msg{Subject: msg.Subject, Reply: msg.Reply, Data: bytes.Clone(msg.Data)}
	if msg.Header != nil {
		m.Header = nats.Header(maps.Clone(msg.Header))
	}
	if tap != nil {
		tap(c, m)
	}
	if c.net.deliver(c, m) == 0 && m.Reply != "" {
		c.net.deliver(nil, &nats.Msg{Subject: m.Reply, Header: nats.Header{"Status": {"503"}, "Description": {"No Responders"}}})
	}
	return nil
}

// deliver queues m for every subscription matching its subject, except
// those of from (no echo), and returns how many there were.
func (n *Network) deliver(from *Conn, m *nats.Msg) int {
	tokens := strings.Split(m.Subject, ".")
	var to []*subscription
	delivered := 0
	n.mu.Lock()
	for c := range n.conns {
		if c == from || c.closed {
			continue
		}
		for s := range c.subs {
			if !matches(s.tokens, tokens) {
				continue
			}
			if c.unread {
				c.socket = append(c.socket, delivery{s, &nats.Msg{Subject: m.Subject, Reply: m.Reply, Data: m.Data, Header: m.Header}})
				delivered++
				continue
			}
			to = append(to, s)
		}
	}
	n.mu.Unlock()
	for _, s := range to {
		if s.enqueue(&nats.Msg{Subject: m.Subject, Reply: m.Reply, Data: m.Data, Header: m.Header}) {
			delivered++
		}
	}
	return delivered
}

// NewInbox implements node.Transport.
func (c *Conn) NewInbox() string {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	c.net.inboxN++
	return "_INBOX." + strconv.Itoa(c.id) + "." + strconv.Itoa(c.net.inboxN)
}

// Flush implements node.Transport: publishing is synchronous, so there is
// nothing to wait for, except what waits unread (Unread).
func (c *Conn) Flush(time.Duration) error {
	if c.IsClosed() {
		return nats.ErrConnectionClosed
	}
	c.readSocket(true)
	return nil
}

// Drain implements node.Transport: the subscriptions take no more
// messages, their handlers take what is pending, then the connection
// closes.
func (c *Conn) Drain() error {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.closed {
		return nats.ErrConnectionClosed
	}
	if c.draining {
		return nil
	}
	c.draining = true
	var done []chan struct{}
	for s := range c.subs {
		s.stop(false)
		done = append(done, s.done)
	}
	go func() {
		for _, d := range done {
			<-d
		}
		c.Close()
	}()
	return nil
}

// Close implements node.Transport: pending messages are dropped, and the
// listeners of nats.CLOSED hear of it.
func (c *Conn) Close() {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for s := range c.subs {
		s.stop(true)
	}
	clear(c.subs)
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
	for ch, st := range c.listeners {
		if st == nats.CLOSED {
			select {
			case ch <- nats.CLOSED:
			default:
			}
		}
	}
	delete(c.net.conns, c)
}

// IsConnected implements node.Transport; a draining connection is still
// connected, as with NATS.
func (c *Conn) IsConnected() bool { return !c.IsClosed() }

// IsClosed implements node.Transport.
func (c *Conn) IsClosed() bool {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.closed
}

// StatusChanged implements node.Transport. An in-memory connection is
// connected from the start, so only nats.CLOSED is ever sent.
func (c *Conn) StatusChanged(status nats.Status) (<-chan nats.Status, func()) {
	ch := make(chan nats.Status, 1)
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	c.listeners[ch] = status
	return ch, func() {
		c.net.mu.Lock()
		defer c.net.mu.Unlock()
		if _, ok := c.listeners[ch]; ok {
			delete(c.listeners, ch)
			close(ch) // as nats.Conn.RemoveStatusListener does
		}
	}
}

// Request publishes data on subject with a new inbox as the reply subject
// and returns the first reply: nats.ErrNoResponders when nobody receives
// the request, ctx's error when no reply comes before it ends.
func (c *Conn) Request(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	replies := make(chan *nats.Msg, 1)
	sub, err := c.Subscribe(c.NewInbox(), 1, 1<<20, func(m *nats.Msg) {
		select {
		case replies <- m:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := c.Publish(&nats.Msg{Subject: subject, Reply: sub.(*subscription).subject(), Data: data}); err != nil {
		return nil, err
	}
	select {
	case m := <-replies:
		if m.Header.Get("Status") == "503" {
			return nil, nats.ErrNoResponders
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Learn implements node.Transport: the network has no streams, so it
// asks the current leader only.
func (c *Conn) Learn(ctx context.Context, cluster string, keys *protocol.MemberKeys) (node.Learned, error) {
	reply, err := c.Request(ctx, protocol.QuerySubject(cluster), nil)
	if err != nil {
		return node.Learned{}, fmt.Errorf("no answer from a leader: %w", err)
	}
	a, err := protocol.ReadAnnouncement(keys, cluster, reply.Data, reply.Header)
	if err != nil {
		return node.Learned{}, fmt.Errorf("leader's answer: %w", err)
	}
	return node.Learned{Leader: a.Leader, Term: a.Term}, nil
}

// subscription is one subscription with its bounded queue and its
// delivery goroutine.
type subscription struct {
	conn     *Conn
	tokens   []string
	handler  func(*nats.Msg)
	maxMsgs  int
	maxBytes int
	wake     chan struct{} // capacity 1
	done     chan struct{} // closed when run returns

	mu        sync.Mutex
	queue     []*nats.Msg
	bytes     int
	dropped   int
	accepting bool
}

func (s *subscription) subject() string { return strings.Join(s.tokens, ".") }

// enqueue queues m unless the subscription is stopped; it drops and
// counts m when the queue is full. It reports whether the subscription
// received m (a drop counts as received, as NATS counts a slow consumer's
// message as delivered).
func (s *subscription) enqueue(m *nats.Msg) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.accepting {
		return false
	}
	if len(s.queue) >= s.maxMsgs || s.bytes+len(m.Data) > s.maxBytes {
		s.dropped++
		return true
	}
	s.queue = append(s.queue, m)
	s.bytes += len(m.Data)
	s.signal()
	return true
}

func (s *subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stop makes the subscription take no more messages; with discard, what
// is pending is dropped too. The delivery goroutine returns once the
// queue is empty.
func (s *subscription) stop(discard bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepting = false
	if discard {
		clear(s.queue)
		s.queue, s.bytes = nil, 0
	}
	s.signal()
}

// run delivers the queue to the handler, one message at a time.
func (s *subscription) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			accepting := s.accepting
			s.mu.Unlock()
			if !accepting {
				return
			}
			<-s.wake
			continue
		}
		m := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.bytes -= len(m.Data)
		s.mu.Unlock()
		s.handler(m)
	}
}

// Unsubscribe implements node.Subscription: pending messages are dropped
// and the handler gets no more.
func (s *subscription) Unsubscribe() error {
	c := s.conn
	c.net.mu.Lock()
	_, ok := c.subs[s]
	delete(c.subs, s)
	closed := c.closed
	c.net.mu.Unlock()
	if closed {
		return nats.ErrConnectionClosed
	}
	if !ok {
		return nats.ErrBadSubscription
	}
	s.stop(true)
	return nil
}

// Dropped implements node.Subscription.
func (s *subscription) Dropped() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped, nil
}

// Pending implements node.Subscription.
func (s *subscription) Pending() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), nil
}

// parseSubject splits a subject into its tokens; wildcards only where
// subscribing.
func parseSubject(subject string, wildcards bool) ([]string, error) {
	tokens := strings.Split(subject, ".")
	for i, t := range tokens {
		switch {
		case t == "" || strings.ContainsAny(t, " \t\r\n"):
			return nil, fmt.Errorf("%w: %q", nats.ErrBadSubject, subject)
		case (t == "*" || t == ">") && !wildcards:
			return nil, fmt.Errorf("%w: %q: wildcard in a published subject", nats.ErrBadSubject, subject)
		case t == ">" && i != len(tokens)-1:
			return nil, fmt.Errorf("%w: %q: > not last", nats.ErrBadSubject, subject)
		}
	}
	return tokens, nil
}

// matches reports whether the subject tokens match the pattern.
func matches(pattern, subject []string) bool {
	for i, p := range pattern {
		if p == ">" {
			return len(subject) > i
		}
		if i >= len(subject) || (p != "*" && p != subject[i]) {
			return false
		}
	}
	return len(pattern) == len(subject)
}
