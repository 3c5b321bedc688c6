package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/protocol"
)

// fakeGroupConn records what a Group does with its connection.
type fakeGroupConn struct {
	startErr error

	mu    sync.Mutex
	calls []string
}

func (c *fakeGroupConn) record(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
}

func (c *fakeGroupConn) called() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func (c *fakeGroupConn) Start() error                        { c.record("start"); return c.startErr }
func (c *fakeGroupConn) Stop()                               { c.record("stop") }
func (c *fakeGroupConn) Connected() bool                     { return true }
func (c *fakeGroupConn) Drain(timeout time.Duration)         { c.record(fmt.Sprint("drain ", timeout)) }
func (c *fakeGroupConn) Close()                              { c.record("close") }
func (c *fakeGroupConn) SubscriptionDrops() int              { return 1 }
func (c *fakeGroupConn) Batches() (batches, messages uint64) { return 2, 3 }
func (c *fakeGroupConn) Refused() uint64                     { return 4 }
func (c *fakeGroupConn) Beats() (lost, refused uint64)       { return 5, 6 }
func (c *fakeGroupConn) BeatsFollowed() int                  { return 7 }

// TestGroupConfigChecked: NewGroup refuses a group without a connection
// or a member ID, or with a negative time-out or beat interval.
func TestGroupConfigChecked(t *testing.T) {
	conn := GroupDeps{Conn: &fakeGroupConn{}}
	for name, tc := range map[string]struct {
		cfg  GroupConfig
		deps GroupDeps
	}{
		"no connection":    {GroupConfig{ID: 1}, GroupDeps{}},
		"no member ID":     {GroupConfig{}, conn},
		"negative timeout": {GroupConfig{ID: 1, ShutdownTimeout: -1}, conn},
		"negative beat":    {GroupConfig{ID: 1, Beat: -1}, conn},
	} {
		if _, err := NewGroup(tc.cfg, tc.deps); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestGroupRunsItsConnection: Run starts the connection, and once the
// elections have left stops it and drains it within the shutdown
// time-out; a connection that does not start is closed at once.
func TestGroupRunsItsConnection(t *testing.T) {
	conn := &fakeGroupConn{}
	g, err := NewGroup(GroupConfig{ID: 1}, GroupDeps{Conn: conn})
	if err != nil {
		t.Fatal(err)
	}
	if g.Healthy() {
		t.Error("healthy without elections")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "stop", fmt.Sprint("drain ", DefaultShutdownTimeout)}
	if got := conn.called(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if err := g.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}

	failing := &fakeGroupConn{startErr: errors.New("refused")}
	g, err = NewGroup(GroupConfig{ID: 1}, GroupDeps{Conn: failing})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Run(context.Background()); !errors.Is(err, failing.startErr) {
		t.Errorf("Run: %v, want the start's error", err)
	}
	if got, want := failing.called(), []string{"start", "close"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if _, err := g.Add(Config{Election: election.Config{ID: 1}}, Deps{}); !errors.Is(err, ErrStopped) {
		t.Errorf("Add after Run: %v, want ErrStopped", err)
	}
}

// TestGroupMetricsReadTheConnection: the group's metrics of the shared
// connection are its counters.
func TestGroupMetricsReadTheConnection(t *testing.T) {
	g, err := NewGroup(GroupConfig{ID: 1}, GroupDeps{Conn: &fakeGroupConn{}})
	if err != nil {
		t.Fatal(err)
	}
	families, err := g.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil && len(m.GetLabel()) == 0 {
				got[f.GetName()] = c.GetValue()
			}
			if g := m.GetGauge(); g != nil && len(m.GetLabel()) == 0 {
				got[f.GetName()] = g.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"election_subscription_dropped_total": 1,
		"election_batches_sent_total":         2,
		"election_batched_messages_total":     3,
		"election_batches_dropped_total":      4,
		"election_beats_lost_total":           5,
		"election_beats_dropped_total":        6,
		"election_beats_followed":             7,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

// In a group with beats, a Bully or ring election's heartbeats are a
// backstop: frequent for a while after a claim, then quiet, on a grid of
// the frequent interval, with a leader time-out above the quiet
// interval; Paxos and byzantine keep
// their timing. Every timing it makes is one the machines accept.
func TestBackstop(t *testing.T) {
	base := election.DefaultTiming(5)
	for _, algorithm := range []protocol.Algorithm{protocol.Bully, protocol.Ring} {
		got := backstop(algorithm, base)
		want := base
		want.HeartbeatTicks = base.HeartbeatTicks * BeatBackstop
		want.QuietHeartbeatTicks = base.HeartbeatTicks * QuietBackstop
		want.QuietGrid = want.HeartbeatTicks
		want.LeaderTimeoutTicks = base.LeaderTimeoutTicks * QuietBackstop
		want.PresenceTicks = base.PresenceTicks * BeatBackstop
		want.LeaseTicks, want.LeaderLeaseTicks = base.LeaseTicks*BeatBackstop, base.LeaderLeaseTicks*BeatBackstop
		if algorithm == protocol.Bully {
			want.ColdStartTicks = base.LeaderTimeoutTicks * BeatBackstop
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", algorithm, got, want)
		}
		if _, err := (election.Config{ID: 1, Members: []uint64{1, 2, 3}, Timing: got}).Validate(); err != nil {
			t.Errorf("%s: %v", algorithm, err)
		}
	}
	lease := election.DefaultLeaseTiming(5)
	for _, algorithm := range []protocol.Algorithm{protocol.Paxos, protocol.Byzantine} {
		if got := backstop(algorithm, lease); got != lease {
			t.Errorf("%s: %+v, want its own %+v", algorithm, got, lease)
		}
	}
}

var errNoLeader = errors.New("no leader answered")

// gatedSource is a TermSource whose queries wait until release is
// closed, counting how many wait at once.
type gatedSource struct {
	release chan struct{}
	mu      sync.Mutex
	now     int // queries waiting
	most    int // the most that waited at once
	asked   int // queries asked
}

func (s *gatedSource) Leader(ctx context.Context) (protocol.Announcement, error) {
	s.mu.Lock()
	s.now++
	s.asked++
	s.most = max(s.most, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return protocol.Announcement{}, errNoLeader
}

func (s *gatedSource) LastAnnounced(context.Context) (protocol.Announcement, error) {
	return protocol.Announcement{}, errNoLeader
}

func (s *gatedSource) counts() (now, most, asked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now, s.most, s.asked
}

// TestGroupStartsAFewAtATime: a group's elections learn their cluster's
// term at most MaxStarting at once; the others wait their turn, and all
// start.
func TestGroupStartsAFewAtATime(t *testing.T) {
	g, err := NewGroup(GroupConfig{ID: 1, Logger: testLogger()}, GroupDeps{Conn: &fakeGroupConn{}})
	if err != nil {
		t.Fatal(err)
	}
	source := &gatedSource{release: make(chan struct{})}
	const n = MaxStarting + 16
	for i := range n {
		cfg := Config{Cluster: fmt.Sprintf("shard-%d", i), Algorithm: protocol.Bully, Election: electionConfig(1, []uint64{1, 2}), DataDir: t.TempDir(), LearnTimeout: time.Minute}
		deps := Deps{Transport: endpoint(1), Cluster: source, Machines: machines.Factory{Algorithm: cfg.Algorithm, Cluster: cfg.Cluster}.New}
		if _, err := g.Add(cfg, deps); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	batontest.CheckFor(t, 10*time.Second, func() error {
		if now, _, _ := source.counts(); now != MaxStarting {
			return fmt.Errorf("%d elections learning at once, want %d", now, MaxStarting)
		}
		return nil
	})
	close(source.release)
	batontest.CheckFor(t, 10*time.Second, func() error {
		if !g.Healthy() {
			return errors.New("not every election started")
		}
		return nil
	})
	if _, most, asked := source.counts(); most != MaxStarting || asked != n {
		t.Errorf("at most %d learning at once of %d asked, want %d of %d", most, asked, MaxStarting, n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
