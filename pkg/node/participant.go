package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
)

// Callbacks are what Run calls as the node's leadership changes, modelled
// on client-go's leaderelection callbacks; they are set in Config. Every
// one is optional, but OnStoppedLeading needs OnStartedLeading.
type Callbacks struct {
	// OnStartedLeading runs, on a goroutine of its own, when this node
	// starts leading. Its context is cancelled as soon as the node stops
	// leading (by the node's event loop, before the message that hands
	// over, a Resign, leaves it), its lease ends (Paxos), its NATS
	// connection is lost (it can no longer confirm that it leads) or
	// Run's context ends. Run waits for it to return before calling
	// OnStoppedLeading, and for both before it returns itself.
	//
	// Work done here is exclusive only as far as the algorithm makes
	// leadership exclusive: with Paxos, the context ends no later than the
	// node's lease, so two nodes' OnStartedLeading contexts never overlap
	// in real time within the clock-drift bound; with Bully and the ring,
	// a partition can give two nodes leadership at once, so fence with the
	// term (pkg/leader.Fence).
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs after OnStartedLeading has returned, each time
	// the node stops leading.
	OnStoppedLeading func()
	// OnNewLeader runs when the node learns of a new leadership (leader,
	// term), this node's own included. It runs on a goroutine that Run
	// owns, one call at a time: a slow callback delays the next
	// notifications, never the node, and it is told the newest leadership
	// each time, so one superseded meanwhile may be skipped.
	OnNewLeader func(leader, term uint64)
}

// set reports whether any callback is set: Run follows the leadership
// only then.
func (cb Callbacks) set() bool {
	return cb.OnStartedLeading != nil || cb.OnStoppedLeading != nil || cb.OnNewLeader != nil
}

// validate checks the callbacks of a Config.
func (cb Callbacks) validate() error {
	if cb.OnStoppedLeading != nil && cb.OnStartedLeading == nil {
		return fmt.Errorf("%w: Callbacks.OnStoppedLeading without OnStartedLeading", ErrConfig)
	}
	return nil
}

// lead calls cb as the node's leadership changes, until ctx ends, and
// returns then (after OnStoppedLeading, if the node was leading). Run runs
// it beside the node, with a context that ends when Run's does and at the
// latest when Run returns; a leader that Run makes hand over stops leading
// here too.
func (n *Node) lead(ctx context.Context, cb Callbacks) {
	changed := n.watch()
	defer n.unwatch(changed)
	// The connection's changes wake the loop too: a node that lost its
	// connection cannot confirm that it leads.
	defer n.tr.Watch(changed)()

	var (
		leading    bool
		cancelWork context.CancelFunc
		workDone   chan struct{}
		workTerm   uint64 // the leadership the work runs under
		lastLeader uint64
		lastTerm   uint64
		leaseTimer *time.Timer
	)
	stopLeading := func() {
		if !leading {
			return
		}
		leading = false
		cancelWork()
		<-workDone
		if cb.OnStoppedLeading != nil {
			cb.OnStoppedLeading()
		}
	}
	defer stopLeading()
	for {
		if leaseTimer != nil {
			leaseTimer.Stop()
			leaseTimer = nil
		}
		st := n.Status()
		if st.Leader != nil && (*st.Leader != lastLeader || st.Term != lastTerm) {
			lastLeader, lastTerm = *st.Leader, st.Term
			if cb.OnNewLeader != nil {
				cb.OnNewLeader(lastLeader, lastTerm)
			}
		}
		term := n.leadership.current()
		v := n.view.Load()
		now := v.running && n.tr.Connected() && v.leadingAt(time.Now()) != nil && term != 0
		if leading && (!now || term != workTerm) {
			// It stopped leading, or leads again under a new leadership
			// since the last look: the old work ends first.
			stopLeading()
		}
		if now && !leading && cb.OnStartedLeading != nil {
			// The work ends with ctx, and with the leadership as soon as
			// the event loop ends it, before this loop hears of it.
			workCtx, cancel := context.WithCancel(ctx)
			if detach, ok := n.leadership.attach(term, cancel); ok {
				leading, workTerm = true, term
				cancelWork = func() { detach(); cancel() }
				workDone = make(chan struct{})
				go func() {
					defer close(workDone)
					cb.OnStartedLeading(workCtx)
				}()
			} else {
				cancel() // ended meanwhile: the change wakes this loop again
			}
		}
		if until := v.leaseUntil; leading && !until.IsZero() {
			// Look again when the lease ends (at once if it just has),
			// unless it is renewed first.
			leaseTimer = time.AfterFunc(time.Until(until), func() { notify(changed) })
		}
		select {
		case <-ctx.Done():
			if leaseTimer != nil {
				leaseTimer.Stop()
			}
			return
		case <-changed:
		}
	}
}

// notify wakes a watcher without blocking: a notification pending is
// enough, since the watcher reads the current state.
func notify(ch chan struct{}) { transport.Notify(ch) }

// leadership tells the leaderships of this node apart and ends the work
// of each: begun when the event loop shows a new leadership, ended by the
// event loop when it ends (before the messages of that step are sent) or
// when the node stops, which cancels the work attached to it there and
// then.
type leadership struct {
	mu      sync.Mutex
	of      *protocol.Announcement
	gen     uint64                        // of the current leadership; 0 while none
	next    uint64                        // the last number given to a leadership or an attachment
	cancels map[uint64]context.CancelFunc // by attachment, of the current leadership
}

// begin starts leadership a, ending any other first.
func (l *leadership) begin(a *protocol.Announcement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.of == a {
		return
	}
	l.endLocked()
	l.of = a
	l.next++
	l.gen = l.next
}

// end ends the current leadership, if any, and cancels its work.
func (l *leadership) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked()
}

func (l *leadership) endLocked() {
	for _, cancel := range l.cancels {
		cancel()
	}
	clear(l.cancels)
	l.of, l.gen = nil, 0
}

// current returns the current leadership, or 0.
func (l *leadership) current() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// attach makes the end of leadership gen call cancel, unless it has ended
// already (false). detach undoes it.
func (l *leadership) attach(gen uint64, cancel context.CancelFunc) (detach func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen == 0 || gen != l.gen {
		return nil, false
	}
	if l.cancels == nil {
		l.cancels = make(map[uint64]context.CancelFunc)
	}
	l.next++
	key := l.next
	l.cancels[key] = cancel
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.cancels, key)
	}, true
}
