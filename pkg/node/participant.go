package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Callbacks are what Lead calls as the node's leadership changes, modelled
// on client-go's leaderelection callbacks.
type Callbacks struct {
	// OnStartedLeading runs, on a goroutine of its own, when this node
	// starts leading. Its context is cancelled as soon as the node stops
	// leading, its lease ends (Paxos), its NATS connection is lost (it can
	// no longer confirm that it leads) or Lead's context ends. Lead waits
	// for it to return before calling OnStoppedLeading. Required.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs after OnStartedLeading has returned, each time
	// the node stops leading. Optional.
	OnStoppedLeading func()
	// OnNewLeader runs when the node learns of a new leadership (leader,
	// term), this node's own included. It runs on Lead's goroutine: a slow
	// callback delays the next notifications, never the node, and it is
	// told the newest leadership each time, so one superseded meanwhile may
	// be skipped. Optional.
	OnNewLeader func(leader, term uint64)
}

// Lead calls cb as the node's leadership changes, until ctx ends, and
// returns nil then (after OnStoppedLeading, if the node was leading). It
// does not run the node: call Run as well, with a context that outlives
// Lead's, or cancel Lead's first. Cancelling Run's context makes a leader
// hand over, which ends its leadership here too.
//
// Work done in OnStartedLeading is exclusive only as far as the algorithm
// makes leadership exclusive: with Paxos, the context ends no later than
// the node's lease, so two nodes' OnStartedLeading contexts never overlap
// in real time within the clock-drift bound; with Bully and the ring, a
// partition can give two nodes leadership at once, so fence with the term
// (pkg/leader.Fence).
func (n *Node) Lead(ctx context.Context, cb Callbacks) error {
	if cb.OnStartedLeading == nil {
		return fmt.Errorf("%w: Callbacks.OnStartedLeading is required", ErrConfig)
	}
	changed := n.watch()
	defer n.unwatch(changed)
	// The connection's changes wake the loop too: a node that lost its
	// connection cannot confirm that it leads.
	var forwarders sync.WaitGroup
	var stops []func()
	for _, s := range []nats.Status{nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED} {
		ch, stop := n.nc.StatusChanged(s)
		stops = append(stops, stop)
		forwarders.Go(func() { forward(ch, changed) })
	}
	defer func() {
		for _, stop := range stops {
			stop() // closes the channel, which ends its forwarder
		}
		forwarders.Wait()
	}()

	var (
		leading    bool
		cancelWork context.CancelFunc
		workDone   chan struct{}
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
		now := n.running.Load() && n.nc.IsConnected() && n.leadingNow() != nil
		switch {
		case now && !leading:
			leading = true
			workCtx, cancel := context.WithCancel(ctx)
			cancelWork = cancel
			workDone = make(chan struct{})
			go func() {
				defer close(workDone)
				cb.OnStartedLeading(workCtx)
			}()
		case !now && leading:
			stopLeading()
		}
		if until := n.lease.Load(); leading && until != nil {
			// Look again when the lease ends, unless it is renewed first.
			leaseTimer = time.AfterFunc(time.Until(*until), func() { notify(changed) })
		}
		select {
		case <-ctx.Done():
			if leaseTimer != nil {
				leaseTimer.Stop()
			}
			return nil
		case <-changed:
		}
	}
}

// forward turns a status channel's receptions into notifications, until
// the channel is closed by its stop function.
func forward(ch <-chan nats.Status, changed chan struct{}) {
	for range ch {
		notify(changed)
	}
}

// notify wakes a watcher without blocking: a notification pending is
// enough, since the watcher reads the current state.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watchers are the channels notified on every status change.
type watchers struct {
	mu  sync.Mutex
	chs map[chan struct{}]struct{}
}

func (n *Node) watch() chan struct{} {
	ch := make(chan struct{}, 1)
	n.watchers.mu.Lock()
	defer n.watchers.mu.Unlock()
	if n.watchers.chs == nil {
		n.watchers.chs = make(map[chan struct{}]struct{})
	}
	n.watchers.chs[ch] = struct{}{}
	return ch
}

func (n *Node) unwatch(ch chan struct{}) {
	n.watchers.mu.Lock()
	defer n.watchers.mu.Unlock()
	delete(n.watchers.chs, ch)
}

// changed notifies every watcher; setStatus calls it.
func (n *Node) changed() {
	n.watchers.mu.Lock()
	defer n.watchers.mu.Unlock()
	for ch := range n.watchers.chs {
		notify(ch)
	}
}
