package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// views follows the GET /status of every node of a cluster with long polls
// (localcluster.WatchStatus), so that the moment the nodes agree is seen
// when it happens, without the load of polling 101 nodes every few
// milliseconds.
type views struct {
	mu      sync.Mutex
	by      map[uint64]view
	changed chan struct{} // closed, and replaced, on every change
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// view is what one node last reported, and when that was received.
type view struct {
	status protocol.Status
	up     bool // reachable: false while it is down or restarting
	at     time.Time
}

// follow starts following every node of nodes; stop ends it.
func (e *environment) follow(ctx context.Context, nodes []*localcluster.Node) *views {
	ctx, cancel := context.WithCancel(ctx)
	v := &views{by: make(map[uint64]view, len(nodes)), changed: make(chan struct{}), stop: cancel}
	client := localcluster.NewWatchClient()
	for _, n := range nodes {
		v.wg.Go(func() {
			localcluster.WatchStatus(ctx, client, n.HTTPAddr, 20*time.Millisecond, func(s protocol.Status, up bool) {
				v.set(n.ID, view{status: s, up: up, at: time.Now()})
			})
		})
	}
	return v
}

func (v *views) set(id uint64, w view) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.by[id] = w
	close(v.changed)
	v.changed = make(chan struct{})
}

// close stops following and waits for the watchers.
func (v *views) close() {
	v.stop()
	v.wg.Wait()
}

// agreed reports whether every node of live names want, and when the last
// of them came to; otherwise it returns the channel closed on the next
// change. With leading, want must also report itself the leader and every
// node name it in want's term: a node restarted with its data may report
// the leader of the term it restored (a byzantine member shows that
// term's certificate) before the cluster has elected anew.
func (v *views) agreed(live []*localcluster.Node, want uint64, leading bool) (bool, time.Time, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var last time.Time
	term := uint64(0)
	if leading {
		w, ok := v.by[want]
		if !ok || !w.up || w.status.State != election.Leader.String() {
			return false, time.Time{}, v.changed
		}
		term = w.status.Term
	}
	for _, n := range live {
		w, ok := v.by[n.ID]
		if !ok || !w.up || w.status.Leader == nil || *w.status.Leader != want {
			return false, time.Time{}, v.changed
		}
		if leading && w.status.Term != term {
			return false, time.Time{}, v.changed
		}
		if w.at.After(last) {
			last = w.at
		}
	}
	return true, last, nil
}

// describe renders what each node of live reports, for error messages.
func (v *views) describe(live []*localcluster.Node) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	for i, n := range live {
		if i > 0 {
			b.WriteString(", ")
		}
		w, ok := v.by[n.ID]
		s := w.status
		switch {
		case !ok || !w.up:
			fmt.Fprintf(&b, "node %d: unreachable", n.ID)
		case s.Leader == nil:
			fmt.Fprintf(&b, "node %d: leader null (%s, term %d)", n.ID, s.State, s.Term)
		default:
			fmt.Fprintf(&b, "node %d: leader %d (%s, term %d)", n.ID, *s.Leader, s.State, s.Term)
		}
	}
	return b.String()
}

// waitAgreed waits until every node of live names want as its leader, and
// returns when the last of them was seen to, or t0 if that was earlier (a
// node that already named want).
func (e *environment) waitAgreed(ctx context.Context, v *views, live []*localcluster.Node, want uint64, t0 time.Time) (time.Time, error) {
	return e.wait(ctx, v, live, want, false, t0)
}

// waitLed waits, as waitAgreed, until want leads and every node of live
// names it in its term (views.agreed with leading).
func (e *environment) waitLed(ctx context.Context, v *views, live []*localcluster.Node, want uint64, t0 time.Time) (time.Time, error) {
	return e.wait(ctx, v, live, want, true, t0)
}

func (e *environment) wait(ctx context.Context, v *views, live []*localcluster.Node, want uint64, leading bool, t0 time.Time) (time.Time, error) {
	deadline := time.NewTimer(e.cfg.timeout)
	defer deadline.Stop()
	for {
		for _, n := range live {
			if !n.Running() {
				return time.Time{}, fmt.Errorf("node %d exited: %v; see %s", n.ID, n.ExitErr(), n.LogPath)
			}
		}
		ok, at, changed := v.agreed(live, want, leading)
		if ok {
			if at.Before(t0) {
				at = t0
			}
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("no agreement on leader %d within %s: %s", want, e.cfg.timeout, v.describe(live))
		case <-changed:
		}
	}
}
