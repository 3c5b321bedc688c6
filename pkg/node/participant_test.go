package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// leadLog records what Run called back, in order.
type leadLog struct {
	mu      sync.Mutex
	events  []string
	started chan context.Context
	stopped chan struct{}
	// slowStop is how long OnStoppedLeading takes (in a synctest
	// bubble's time): a slow application's.
	slowStop time.Duration
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
			time.Sleep(l.slowStop)
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

// leading sets cfg's callbacks to l's.
func (l *leadLog) leading(cfg *node.Config) { cfg.Callbacks = l.callbacks() }

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

// The leader's work runs while it leads and ends when it hands over,
// before its Run returns, and OnStoppedLeading with it; the next leader's
// work then starts, and every node hears of both leaders.
func TestCallbacksHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		logs := map[uint64]*leadLog{}
		for _, id := range s.members {
			logs[id] = newLeadLog()
			logs[id].slowStop = time.Minute
			s.add(id, logs[id].leading)
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
		select {
		case <-logs[3].stopped: // Run returns after OnStoppedLeading
		default:
			t.Errorf("node 3's Run returned before OnStoppedLeading: %s", logs[3])
		}
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
func TestCallbacksConnectionLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2)
		l := newLeadLog()
		s.add(1, nil)
		s.add(2, l.leading)
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
func TestCallbacksLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Paxos, 1, 2, 3)
		l := newLeadLog()
		s.add(1, nil)
		s.add(2, nil)
		s.add(3, l.leading)
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

// A node whose leadership stops can be told so only if it can be told
// that it started: OnStoppedLeading alone is a configuration error, while
// OnNewLeader alone is enough to follow the leader.
func TestCallbacksConfig(t *testing.T) {
	s := newSim(t, protocol.Bully, 1)
	conn := s.net.Join(1)
	_, err := newTestNode(conn, conn, node.Config{
		Cluster:   "seam",
		Algorithm: protocol.Bully,
		Election:  election.Config{ID: 1, Members: []uint64{1}, Timing: seamTiming},
		DataDir:   t.TempDir(),
		Callbacks: node.Callbacks{OnStoppedLeading: func() {}},
	}, machines.Factory{})
	if !errors.Is(err, node.ErrConfig) {
		t.Fatalf("OnStoppedLeading without OnStartedLeading: %v, want ErrConfig", err)
	}
	s.add(1, func(cfg *node.Config) { cfg.Callbacks.OnNewLeader = func(uint64, uint64) {} })
}

// A node that only follows the leader (OnNewLeader) hears of it, and of
// itself when it leads; its Run still ends cleanly.
func TestOnNewLeaderAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2)
		heard := map[uint64]chan uint64{}
		for _, id := range s.members {
			ch := make(chan uint64, 16)
			heard[id] = ch
			s.add(id, func(cfg *node.Config) {
				cfg.Callbacks.OnNewLeader = func(leader, _ uint64) { ch <- leader }
			})
		}
		for _, id := range s.members {
			s.nodes[id].run()
		}
		for _, id := range s.members {
			for leader := uint64(0); leader != 2; {
				select {
				case leader = <-heard[id]:
				case <-time.After(waitLimit):
					t.Fatalf("node %d: OnNewLeader was not called with leader 2", id)
				}
			}
		}
		for _, id := range s.members {
			if err := s.nodes[id].stop(); err != nil {
				t.Errorf("node %d: Run: %v", id, err)
			}
		}
	})
}
