package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
)

// Transport is what a node needs of its connection to NATS. New wraps a
// *nats.Conn in one; NewWithTransport takes any other, such as the
// in-memory network of pkg/node/nodetest.
//
// A Transport must keep NATS's semantics where the node relies on them:
// subjects with the wildcards * and >; a handler per subscription, called
// on a goroutine of the transport, one message at a time, never for a
// message published after Unsubscribe returned; bounded pending messages
// per subscription, dropped and counted when full; a message published
// with a reply subject that no subscription receives gets a reply with the
// header Status: 503 ("no responders") on that subject; no echo of the
// connection's own messages.
type Transport interface {
	// Subscribe calls handler with every message on subject, holding at
	// most pendingMsgs messages and pendingBytes bytes that the handler
	// has not taken yet; beyond them messages are dropped and counted by
	// Subscription.Dropped.
	Subscribe(subject string, pendingMsgs, pendingBytes int, handler func(*nats.Msg)) (Subscription, error)
	// Publish sends msg (Subject, Data, Header, and Reply if not empty).
	// Answering a request is publishing on its reply subject.
	Publish(msg *nats.Msg) error
	// NewInbox returns a new unique subject for replies to this
	// connection.
	NewInbox() string
	// Flush returns once the server has processed everything published
	// and subscribed so far, or after timeout.
	Flush(timeout time.Duration) error
	// Drain stops the subscriptions, lets their handlers take what is
	// pending, flushes and closes the connection; it returns at once, and
	// the status CLOSED follows. On a closed connection it returns
	// nats.ErrConnectionClosed.
	Drain() error
	// Close closes the connection at once.
	Close()
	IsConnected() bool
	IsClosed() bool
	// StatusChanged returns a channel that receives status when the
	// connection reaches it (nats.CONNECTED or nats.CLOSED), and the
	// function that stops it.
	StatusChanged(status nats.Status) (ch <-chan nats.Status, stop func())
	// Learn returns what the cluster can tell a node that starts: the
	// current leader's answer to a query on protocol.QuerySubject, and
	// the term of the last announcement kept by a JetStream stream on the
	// leader subject where the transport has streams; with keys, only
	// announcements signed by the leader they name count. What is not
	// known before ctx ends is zero, and the error says why.
	Learn(ctx context.Context, cluster string, keys *protocol.MemberKeys) (Learned, error)
}

// Learned is what a node learns of its cluster as it starts.
type Learned struct {
	// Leader and Term are the live leader that answered the query and its
	// term, zero if none answered.
	Leader, Term uint64
	// Last is the term of the last announcement kept by a stream, 0 if
	// none.
	Last uint64
}

// MaxTerm is the highest term learned.
func (l Learned) MaxTerm() uint64 { return max(l.Term, l.Last) }

// Bounded is l without what lies above limit: a leader whose term is above
// it is forgotten, a last announced term above it is cut to it.
func (l Learned) Bounded(limit uint64) Learned {
	if l.Term > limit {
		l.Leader, l.Term = 0, 0
	}
	l.Last = min(l.Last, limit)
	return l
}

// Subscription is one subscription of a Transport.
type Subscription interface {
	Unsubscribe() error
	// Dropped is how many messages were dropped because the pending
	// limits were reached.
	Dropped() (int, error)
	// Pending is how many messages wait for the handler.
	Pending() (int, error)
}

// natsTransport is the Transport of a *nats.Conn.
type natsTransport struct{ nc *nats.Conn }

// NATSTransport returns the Transport of nc.
func NATSTransport(nc *nats.Conn) Transport { return natsTransport{nc} }

func (t natsTransport) Subscribe(subject string, pendingMsgs, pendingBytes int, handler func(*nats.Msg)) (Subscription, error) {
	sub, err := t.nc.Subscribe(subject, handler)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(pendingMsgs, pendingBytes); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	return natsSubscription{sub}, nil
}

// natsSubscription is the Subscription of a *nats.Subscription.
type natsSubscription struct{ *nats.Subscription }

func (s natsSubscription) Pending() (int, error) {
	msgs, _, err := s.Subscription.Pending()
	return msgs, err
}

func (t natsTransport) Publish(msg *nats.Msg) error       { return t.nc.PublishMsg(msg) }
func (t natsTransport) NewInbox() string                  { return t.nc.NewInbox() }
func (t natsTransport) Flush(timeout time.Duration) error { return t.nc.FlushTimeout(timeout) }
func (t natsTransport) Drain() error                      { return t.nc.Drain() }
func (t natsTransport) Close()                            { t.nc.Close() }
func (t natsTransport) IsConnected() bool                 { return t.nc.IsConnected() }
func (t natsTransport) IsClosed() bool                    { return t.nc.IsClosed() }
func (t natsTransport) StatusChanged(status nats.Status) (<-chan nats.Status, func()) {
	ch := t.nc.StatusChanged(status)
	return ch, func() { t.nc.RemoveStatusListener(ch) }
}

// Learn asks the current leader (pkg/leader.Current, by query alone) and
// reads the stream's last announcement (leader.LastAnnounced), both at
// once.
func (t natsTransport) Learn(ctx context.Context, cluster string, keys *protocol.MemberKeys) (Learned, error) {
	opts := []leader.Option{leader.WithKeys(keys)}
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, leader.WithQueryTimeout(time.Until(d)))
	}
	type result struct {
		term uint64
		err  error
	}
	fromStream := make(chan result, 1)
	go func() {
		a, err := leader.LastAnnounced(ctx, t.nc, cluster, opts...)
		if err != nil {
			err = fmt.Errorf("no last announcement from a stream: %w", err)
		}
		fromStream <- result{a.Term, err}
	}()
	a, err := leader.Current(ctx, t.nc, cluster, append(opts, leader.WithoutStream())...)
	if err != nil {
		err = fmt.Errorf("no answer from a leader: %w", err)
	}
	s := <-fromStream
	return Learned{Leader: a.Leader, Term: a.Term, Last: s.term}, errors.Join(err, s.err)
}
