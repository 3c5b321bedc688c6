package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// leadLog records what Lead called, in order.
type leadLog struct {
	mu      sync.Mutex
	events  []string
	started chan context.Context
	stopped chan struct{}
}

func newLeadLog() *leadLog {
	return &leadLog{started: make(chan context.Context, 16), stopped: make(chan struct{}, 16)}
}

func (l *leadLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *leadLog) callbacks() node.Callbacks {
	return node.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			l.add("started")
			l.started <- ctx
			<-ctx.Done()
			l.add("work ended")
		},
		OnStoppedLeading: func() {
			l.add("stopped")
			l.stopped <- struct{}{}
		},
		OnNewLeader: func(leader, term uint64) { l.add(fmt.Sprintf("leader %d", leader)) },
	}
}

func (l *leadLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.events)
}

// lead runs Lead for m until the test ends.
func lead(t *testing.T, m *member, l *leadLog) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Lead(ctx, l.callbacks()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Lead: %v", err)
		}
	})
}

func awaitStarted(t *testing.T, l *leadLog) context.Context {
	t.Helper()
	select {
	case ctx := <-l.started:
		return ctx
	case <-time.After(waitLimit):
		t.Fatalf("OnStartedLeading was not called: %s", l)
		return nil
	}
}

func awaitStopped(t *testing.T, l *leadLog) {
	t.Helper()
	select {
	case <-l.stopped:
	case <-time.After(waitLimit):
		t.Fatalf("OnStoppedLeading was not called: %s", l)
	}
}

// The leader's work runs while it leads and ends when it hands over; the
// next leader's work then starts, and every node hears of both leaders.
func TestLeadHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		logs := map[uint64]*leadLog{}
		for _, id := range s.members {
			m := s.add(id, nil)
			logs[id] = newLeadLog()
			lead(t, m, logs[id])
		}
		for _, id := range s.members {
			s.nodes[id].run()
		}
		work := awaitStarted(t, logs[3])
		if err := s.nodes[3].stop(); err != nil {
			t.Fatal(err)
		}
		if work.Err() == nil {
			t.Error("the old leader's work context is not cancelled after it handed over")
		}
		awaitStopped(t, logs[3])
		awaitStarted(t, logs[2])
		synctest.Wait()
		if got, want := logs[3].String(), "[leader 3 started work ended stopped]"; got != want {
			t.Errorf("node 3: %s, want %s", got, want)
		}
		// OnNewLeader reports the newest leadership each time it runs: node
		// 1 may have learnt of 3 and 2 before it ran, and then tells 2 only.
		if got := logs[1].String(); got != "[leader 3 leader 2]" && got != "[leader 2]" {
			t.Errorf("node 1: %s, want [leader 3 leader 2] or [leader 2]", got)
		}
		if len(logs[1].started) != 0 {
			t.Error("node 1 was told it leads")
		}
	})
}

// A leader whose connection is gone cannot confirm that it leads: its
// work ends at once.
func TestLeadConnectionLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2)
		for _, id := range s.members {
			s.add(id, nil)
		}
		l := newLeadLog()
		lead(t, s.nodes[2], l)
		for _, id := range s.members {
			s.nodes[id].run()
		}
		work := awaitStarted(t, l)
		s.nodes[2].conn.Close()
		awaitStopped(t, l)
		if work.Err() == nil {
			t.Error("work context not cancelled after the connection closed")
		}
	})
}

// A Paxos leader that cannot renew its lease (its messages are held) stops
// its work when the lease ends, whatever its loop is doing.
func TestLeadLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Paxos, 1, 2, 3)
		for _, id := range s.members {
			s.add(id, nil)
		}
		l := newLeadLog()
		lead(t, s.nodes[3], l)
		for _, id := range s.members {
			s.nodes[id].run()
		}
		work := awaitStarted(t, l)
		st := s.nodes[3].Status()
		if st.LeaseRemainingMS == nil {
			t.Fatalf("leader's status has no lease: %+v", st)
		}
		held := time.Now()
		s.nodes[3].conn.Hold()
		awaitStopped(t, l)
		if work.Err() == nil {
			t.Error("work context not cancelled")
		}
		if waited := time.Since(held); waited > time.Duration(*st.LeaseRemainingMS+10)*time.Millisecond {
			t.Errorf("work ended %v after the renewals stopped, later than the lease (%d ms left)", waited, *st.LeaseRemainingMS)
		}
		s.nodes[3].conn.Release()
	})
}

func TestLeadNeedsOnStartedLeading(t *testing.T) {
	s := newSim(t, protocol.Bully, 1)
	m := s.add(1, nil)
	if err := m.Lead(context.Background(), node.Callbacks{}); err == nil {
		t.Fatal("Lead without OnStartedLeading: no error")
	}
}
