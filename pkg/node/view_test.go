package node

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/protocol"
)

// TestStatusNeverLeaderWithoutLease reads the status, the query
// responder's view and the metric of a Paxos node while its goroutine
// makes it lead under short leases, which end, and stop leading, over and
// over: a status that says leader always has a lease that holds, and the
// query responder answers only then. Before the leadership and the lease
// were one value, a reader could take the leadership of one moment with
// the lease of the next (cleared): leader, with no lease.
func TestStatusNeverLeaderWithoutLease(t *testing.T) {
	n, err := newTestNode(endpoint(1), endpoint(1), Config{
		Cluster:   "view",
		Algorithm: protocol.Paxos,
		Election:  electionConfig(1, []uint64{1, 2, 3}),
		DataDir:   t.TempDir(),
		Logger:    testLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	machine, err := machines.Factory{Algorithm: protocol.Paxos}.New(electionConfig(1, []uint64{1, 2, 3}), nil)
	if err != nil {
		t.Fatalf("machine: %v", err)
	}
	drv, err := driver.New(machine, driver.Config{Tick: time.Millisecond, Incarnation: 1})
	if err != nil {
		t.Fatalf("driver.New: %v", err)
	}
	drv.Start(time.Now())
	n.drv = drv
	n.current = &protocol.Announcement{Term: 7}
	leader := election.SoftState{ID: 1, Leader: 1, Term: 7, Role: election.Leader}
	follower := election.SoftState{ID: 1, Term: 7, Role: election.Follower}

	const rounds = 20000
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { // the node's goroutine
		defer wg.Done()
		defer close(done)
		for i := range rounds {
			lease := leader
			// Leases that end now, soon, or later: some end while they
			// are being read. Tick 0 means no lease at all, which no
			// Paxos leader has (it leads only after a round of messages):
			// in the first millisecond the lease ends at tick 1.
			lease.LeaseUntil = max(1, int(time.Since(drv.At(0))/time.Millisecond)+i%3)
			n.show(lease)
			n.show(follower)
		}
	}()
	var bad []string
	var mu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				st := n.Status()
				if st.State == election.Leader.String() && (st.LeaseRemainingMS == nil || *st.LeaseRemainingMS < 0) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%+v", st))
					mu.Unlock()
				}
				if v := n.view.Load(); v.leadingAt(time.Now()) != nil && v.leaseUntil.IsZero() {
					mu.Lock()
					bad = append(bad, "answers queries without a lease")
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads showed a leader without a lease that holds, first %s", len(bad), bad[0])
	}
	if got := n.Status(); got.State != election.Follower.String() {
		t.Errorf("after the last round: state %s, want follower", got.State)
	}
}

// A status with the same leader, term and state has the same ETag, and
// one that differs in any of them another: the watchers are woken on the
// ETag's changes, compared without formatting it.
func TestSameLeadershipIsSameETag(t *testing.T) {
	one, two := uint64(1), uint64(2)
	statuses := []protocol.Status{
		{Term: 1, State: "leader", Leader: &one}, {Term: 1, State: "leader", Leader: &two},
		{Term: 2, State: "leader", Leader: &one}, {Term: 1, State: "follower", Leader: &one},
		{Term: 1, State: "follower"}, {Term: 1, State: "follower", Members: []uint64{1}},
	}
	for _, a := range statuses {
		for _, b := range statuses {
			if same := sameLeadership(a, b); same != (a.ETag() == b.ETag()) {
				t.Errorf("%+v and %+v: same leadership %v, ETags %s and %s", a, b, same, a.ETag(), b.ETag())
			}
		}
	}
}

// since moves when the leadership moves (leader, term or state), and
// only then; a lease that ended shows since its end.
func TestStatusSince(t *testing.T) {
	n, err := newTestNode(endpoint(1), endpoint(1), Config{
		Cluster:   "since",
		Algorithm: protocol.Bully,
		Election:  electionConfig(1, []uint64{1, 2, 3}),
		DataDir:   t.TempDir(),
		Logger:    testLogger(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	since := func() time.Time {
		t.Helper()
		st := n.Status()
		if st.Since == nil {
			t.Fatalf("no since: %+v", st)
		}
		return *st.Since
	}
	before := time.Now()
	n.setView(election.SoftState{ID: 1, Leader: 3, Term: 4, Role: election.Follower}, time.Time{}, nil, true)
	first := since()
	if first.Before(before) || first.After(time.Now()) {
		t.Fatalf("since %v, not within the change (%v)", first, before)
	}
	// The same leadership, with an announcement (a change the readers see): since stays.
	n.setView(election.SoftState{ID: 1, Leader: 3, Term: 4, Role: election.Follower}, time.Time{}, &protocol.Announcement{Term: 4}, true)
	if got := since(); !got.Equal(first) {
		t.Errorf("same leadership: since %v, want %v", got, first)
	}
	before = time.Now()
	n.setView(election.SoftState{ID: 1, Leader: 2, Term: 5, Role: election.Follower}, time.Time{}, nil, true)
	if got := since(); got.Before(before) || got.After(time.Now()) {
		t.Errorf("new leader: since %v, not within the change (%v)", got, before)
	}
	// A leader whose lease has ended shows since the end of its lease.
	ended := time.Now().Add(-time.Second)
	n.setView(election.SoftState{ID: 1, Leader: 1, Term: 6, Role: election.Leader}, ended, nil, true)
	if st := n.Status(); st.Leader != nil || st.Since == nil || !st.Since.Equal(ended.Round(0)) {
		t.Errorf("lease ended: %+v, want no leader since %v", st, ended)
	}
	// A node that does not run shows no since.
	n.setView(election.SoftState{ID: 1, Leader: 2, Term: 5, Role: election.Follower}, time.Time{}, nil, false)
	if st := n.Status(); st.Since != nil {
		t.Errorf("not running: since %v", *st.Since)
	}
}

// As it claims, an election whose clock a hold shifted is put back on its
// quiet heartbeats' grid: its offset becomes whole grid intervals.
func TestAlignGrid(t *testing.T) {
	n := &Node{cfg: Config{Tick: 10 * time.Millisecond}}
	n.cfg.Election.Timing.QuietGrid = 100
	for _, c := range []struct{ offset, want time.Duration }{
		{0, 0},
		{1234 * time.Millisecond, 2 * time.Second},
		{time.Second, time.Second},
		{time.Nanosecond, time.Second},
	} {
		n.offset = c.offset
		n.alignGrid()
		if n.offset != c.want {
			t.Errorf("offset %v aligned to %v, want %v", c.offset, n.offset, c.want)
		}
	}
	n.cfg.Election.Timing.QuietGrid = 0
	n.offset = 1234 * time.Millisecond
	if n.alignGrid(); n.offset != 1234*time.Millisecond {
		t.Errorf("without a grid, offset moved to %v", n.offset)
	}
}

// In a group, an election's ticks end on multiples of the tick, those of
// every election of the process at the same instants; alone, they count
// from the loop's start.
func TestStartOfTicks(t *testing.T) {
	now := time.Unix(1_700_000_000, 123_456_789)
	n := &Node{cfg: Config{Tick: 10 * time.Millisecond}, aligned: true}
	if got, want := n.startOfTicks(now), time.Unix(1_700_000_000, 120_000_000); !got.Equal(want) {
		t.Errorf("in a group: tick 0 starts at %v, want %v", got, want)
	}
	n.aligned = false
	if got := n.startOfTicks(now); !got.Equal(now) {
		t.Errorf("alone: tick 0 starts at %v, want %v", got, now)
	}
	// The clock keeps its monotonic reading: the machine's ticks and
	// leases do not move with the wall clock.
	n.aligned = true
	mono := time.Now()
	got := n.startOfTicks(mono)
	if got == got.Round(0) {
		t.Errorf("tick 0 at %v lost the monotonic clock reading of %v", got, mono)
	}
	if want := mono.Round(0).Truncate(n.cfg.Tick); !got.Round(0).Equal(want) {
		t.Errorf("tick 0 at %v, want %v", got.Round(0), want)
	}
}
