package leader

import (
	"context"

	"github.com/nats-io/nats.go"
)

// RunWhileLeader runs work while node id of cluster is the announced
// leader, for an application that runs beside its node (another process)
// rather than embedding it (pkg/node's Config.Callbacks). It follows the
// leader with Watch: when an announcement names id, it starts work on a
// goroutine it owns with the leadership's term (the fencing token); when a
// newer leadership is announced (another node's, or a new term of id's) or
// the connection closes, it cancels work's context and waits for it to
// return before anything else. It returns nil when ctx ends, the error Watch yields
// otherwise (ErrConnectionClosed when the connection closes).
//
// Beside a node, the application learns that its node stopped leading only
// when a successor is announced or the connection is lost: a node that
// hangs, or a Paxos node whose lease lapses without a successor yet, still
// looks like the leader here. Fence every write with the term, or embed
// the node and give it the work in its Config.Callbacks, whose context
// also ends with the lease.
func RunWhileLeader(ctx context.Context, nc *nats.Conn, cluster string, id uint64, work func(ctx context.Context, term uint64), opts ...Option) error {
	var w *worker
	defer func() { w.stop() }()
	for a, err := range Watch(ctx, nc, cluster, opts...) {
		if err != nil {
			return err
		}
		w.stop()
		w = nil
		if a.Leader == id {
			w = startWorker(ctx, a.Term, work)
		}
	}
	return nil
}

// worker is one run of the leader-only work.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startWorker(ctx context.Context, term uint64, work func(ctx context.Context, term uint64)) *worker {
	ctx, cancel := context.WithCancel(ctx)
	w := &worker{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		work(ctx, term)
	}()
	return w
}

// stop cancels the work and waits for it; a nil worker does nothing.
func (w *worker) stop() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}
