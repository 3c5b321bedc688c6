package observer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-election/baton/pkg/protocol"
)

// setupTimeout bounds one attempt to set up the stream and the consumer,
// and one look at whether the consumer still exists.
const setupTimeout = 5 * time.Second

// delivery is an announcement from the stream, tagged with the stream it
// came from (its creation time): a stream created again numbers its
// messages from 1.
type delivery struct {
	msg    jetstream.Msg
	stream time.Time
}

// note notes d in the cursor as recorded or dropped for good, or, if
// it could not be recorded, as failed.
func (d delivery) note(c *cursor, recorded bool) {
	meta, err := d.msg.Metadata()
	if err != nil {
		return // not from a consumer: nothing to resume
	}
	if recorded {
		c.handled(d.stream, meta.Sequence.Stream)
	} else {
		c.failed(d.stream, meta.Sequence.Stream)
	}
}

// consume sets up the stream and the durable consumer, retrying until it
// succeeds, and hands every announcement to the owner goroutine, which
// acknowledges it once recorded. It returns when ctx ends.
//
// When the consumer is lost (deleted by an operator or with its stream,
// or its iterator ended with another terminal error), consume sets both
// up again: the consumer resumes where the lost one was (see cursor), so
// that no announcement kept by the stream is lost, and few, if any, come
// twice (the history drops those). Meanwhile /healthz reports it.
func (o *Observer) consume(ctx context.Context, nc *nats.Conn, out chan<- delivery) {
	defer o.consuming.Store(false)
	for {
		var msgs jetstream.MessagesContext
		var cons jetstream.Consumer
		var stream time.Time
		for {
			var err error
			if msgs, cons, stream, err = o.setup(ctx, nc); err == nil {
				break
			}
			o.log.Warn("cannot set up the announcement stream; retrying", "stream", o.cfg.Stream, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(setupRetry):
			}
		}
		o.consuming.Store(true)
		since := time.Now()
		err := o.deliver(ctx, msgs, cons, stream, out)
		msgs.Stop()
		o.consuming.Store(false)
		if ctx.Err() != nil {
			return
		}
		o.log.Warn("lost the announcement consumer; setting it up again", "stream", o.cfg.Stream, "consumer", o.cfg.Consumer, "err", err)
		if time.Since(since) < setupRetry {
			// Lost as soon as set up: do not spin.
			select {
			case <-ctx.Done():
				return
			case <-time.After(setupRetry):
			}
		}
	}
}

// deliver hands the announcements of msgs to out until ctx ends or the
// consumer is lost, and returns why it stopped.
func (o *Observer) deliver(ctx context.Context, msgs jetstream.MessagesContext, cons jetstream.Consumer, stream time.Time, out chan<- delivery) error {
	for {
		m, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				// Every other error of Next ends the iterator:
				// ErrConsumerDeleted, ErrBadRequest,
				// ErrMsgIteratorClosed.
				return err
			}
			// The server went quiet: disconnected (the connection
			// reconnects by itself), or the consumer is gone without
			// a word.
			if gone := o.consumerGone(ctx, cons); gone != nil {
				return gone
			}
			o.log.Warn("reading announcements", "err", err)
			continue
		}
		select {
		case out <- delivery{msg: m, stream: stream}:
		case <-ctx.Done():
			return ctx.Err() // not acknowledged: redelivered to the next run
		}
	}
}

// consumerGone returns an error if the server says that cons or its
// stream no longer exists, and nil if it does, or cannot tell.
func (o *Observer) consumerGone(ctx context.Context, cons jetstream.Consumer) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	_, err := cons.Info(ctx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	return nil
}

// setup creates or updates the stream and the durable consumer, and
// returns the consumer's messages and the stream's creation time. A
// consumer that exists keeps where it delivers from (the server refuses
// to change it); one created again starts where the cursor says.
func (o *Observer) setup(ctx context.Context, nc *nats.Conn) (jetstream.MessagesContext, jetstream.Consumer, time.Time, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        o.cfg.Stream,
		Description: "leader announcements of every election cluster, for the observer and late watchers",
		Subjects:    []string{protocol.AllLeaders},
		Storage:     jetstream.FileStorage,
		MaxAge:      o.cfg.StreamMaxAge,
		Replicas:    o.cfg.StreamReplicas,
	})
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("stream: %w", err)
	}
	created := stream.CachedInfo().Created
	cfg := jetstream.ConsumerConfig{
		Durable:       o.cfg.Consumer,
		Description:   "observer history",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: protocol.AllLeaders,
		AckWait:       30 * time.Second,
	}
	var start uint64 // 0: the consumer exists
	existing, err := stream.Consumer(ctx, o.cfg.Consumer)
	switch {
	case err == nil:
		was := existing.CachedInfo().Config
		cfg.DeliverPolicy, cfg.OptStartSeq = was.DeliverPolicy, was.OptStartSeq
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		start = o.cursor.start(created)
		if start > 1 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
		}
	default:
		return nil, nil, time.Time{}, fmt.Errorf("consumer: %w", err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("consumer: %w", err)
	}
	info := cons.CachedInfo()
	o.cursor.adopt(created, start, info.AckFloor.Stream, info.NumAckPending > 0)
	if start > 1 {
		o.log.Info("announcement consumer created again", "consumer", o.cfg.Consumer, "from_sequence", start)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("consumer: %w", err)
	}
	return msgs, cons, created, nil
}

// cursor says where a durable consumer created again starts so that it
// resumes where the lost one was: at the first announcement of the stream
// that the history may not hold, and after every one it does hold. The
// owner goroutine notes what it recorded; consume reads it when it sets
// the consumer up. Its state is three numbers, whatever happens.
//
// It relies on a consumer delivering in stream order, apart from
// redeliveries of what it had not had acknowledged: an announcement
// after the highest one done is either not delivered yet or in flight.
type cursor struct {
	mu sync.Mutex
	// stream is the creation time of the stream the sequences below
	// number; zero before the first set-up.
	stream time.Time
	// done is the highest stream sequence recorded, found a duplicate or
	// dropped as invalid.
	done uint64
	// unsure, if not 0, is the lowest stream sequence that may be
	// missing from the history although a later one is done: one that
	// could not be recorded and waits for its redelivery, or the first
	// the consumer had delivered without an acknowledgement when it was
	// set up. It may name one recorded since; that costs a duplicate.
	unsure uint64
}

// handled notes that the announcement at stream sequence seq of the
// stream created at stream is in the history, or was dropped for good.
func (c *cursor) handled(stream time.Time, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stream.Equal(c.stream) {
		c.done = max(c.done, seq)
	}
}

// failed notes that the announcement at seq could not be recorded: the
// consumer redelivers it, but a consumer created again must start at it.
func (c *cursor) failed(stream time.Time, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stream.Equal(c.stream) && (c.unsure == 0 || seq < c.unsure) {
		c.unsure = seq
	}
}

// start is the stream sequence where a consumer created on the stream
// created at created starts: 1 on a stream the cursor does not know.
func (c *cursor) start(created time.Time) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !created.Equal(c.stream) {
		return 1
	}
	if c.unsure != 0 {
		return c.unsure
	}
	return c.done + 1
}

// adopt notes the consumer just set up on the stream created at created:
// created again from start (0: it existed), with every announcement up to
// ackFloor acknowledged, and some after it delivered but not (pending).
func (c *cursor) adopt(created time.Time, start, ackFloor uint64, pending bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !created.Equal(c.stream) {
		c.stream, c.done, c.unsure = created, 0, 0
	}
	if start > 0 && c.unsure >= start {
		c.unsure = 0 // the new consumer delivers it again
	}
	c.done = max(c.done, ackFloor)
	if pending && (c.unsure == 0 || ackFloor+1 < c.unsure) {
		c.unsure = ackFloor + 1
	}
}
