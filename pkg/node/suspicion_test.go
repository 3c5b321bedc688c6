package node_test

// Tests of what a node records when it suspects its leader, and of how it
// decides when it was itself late (a stalled process, a busy host): on
// the in-memory network, inside testing/synctest bubbles. A node's loop is
// stalled through its injected wall clock (Config.Now), which the loop
// reads as it commits: a Now that sleeps is a loop descheduled for that
// long, on the bubble's fake clock.

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// records keeps every log record of a node, with its attributes.
type records struct {
	mu   sync.Mutex
	list []record
}

type record struct {
	msg   string
	attrs map[string]slog.Value
}

type recordHandler struct {
	r     *records
	attrs []slog.Attr
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	rec := record{msg: r.Message, attrs: map[string]slog.Value{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.list = append(h.r.list, rec)
	return nil
}
func (h recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return recordHandler{r: h.r, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h recordHandler) WithGroup(string) slog.Handler { return h }

// named returns the records whose message is msg.
func (r *records) named(msg string) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, rec := range r.list {
		if rec.msg == msg {
			out = append(out, rec)
		}
	}
	return out
}

// duration reads a duration attribute of rec.
func (rec record) duration(t *testing.T, key string) time.Duration {
	t.Helper()
	v, ok := rec.attrs[key]
	if !ok || v.Kind() != slog.KindDuration {
		t.Fatalf("%q: attribute %s = %v, want a duration (attributes %v)", rec.msg, key, v, rec.attrs)
	}
	return v.Duration()
}

// stallClock is a wall clock that, once armed, makes the next reading
// take the armed duration: the loop that reads it stalls that long.
type stallClock struct {
	armed   atomic.Int64
	stalled chan time.Time // when each stall began
}

func newStallClock() *stallClock { return &stallClock{stalled: make(chan time.Time, 1)} }

func (c *stallClock) now() time.Time {
	if d := c.armed.Swap(0); d > 0 {
		c.stalled <- time.Now()
		time.Sleep(time.Duration(d))
	}
	return time.Now()
}

// pair runs members 1 and 2 with Bully, node 1 on a stall clock and a
// record of its logs; it returns once 2 leads and 1 follows it.
func pair(t *testing.T) (s *sim, follower *member, clock *stallClock, logs *records, term uint64) {
	t.Helper()
	s = newSim(t, protocol.Bully, 1, 2)
	clock, logs = newStallClock(), &records{}
	follower = s.add(1, func(c *node.Config) {
		c.Now = clock.now
		c.Logger = slog.New(recordHandler{r: logs})
	})
	s.add(2, nil)
	ch := s.observer()
	follower.run()
	s.nodes[2].run()
	a := awaitLeader(t, ch, 2)
	synctest.Wait()
	if err := s.follows(2, a.Term); err != nil {
		t.Fatal(err)
	}
	return s, follower, clock, logs, a.Term
}

var leaderTimeout = time.Duration(seamTiming.LeaderTimeoutTicks) * node.DefaultTick

// A leader that falls silent is suspected once, and the suspicion is
// logged and counted with its evidence: how long ago the follower last
// heard the leader, and that the follower itself was on time.
func TestSuspicionLogsLeaderSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, follower, _, logs, term := pair(t)
		s.nodes[2].conn.Hold() // its heartbeats stop; its connection stays open
		time.Sleep(2 * leaderTimeout)
		synctest.Wait()
		got := logs.named("leader timed out")
		if len(got) != 1 {
			t.Fatalf("%d records of the time-out, want 1", len(got))
		}
		rec := got[0]
		t.Logf("%s: %v", rec.msg, rec.attrs)
		if v := rec.attrs["leader"]; v.Uint64() != 2 {
			t.Errorf("leader %v, want 2", v)
		}
		if v := rec.attrs["term"]; v.Uint64() != term {
			t.Errorf("term %v, want %d", v, term)
		}
		// Silent for the time-out, counted in whole ticks from the tick of
		// the last heartbeat.
		heard := rec.duration(t, "heard_ago")
		if heard < leaderTimeout-node.DefaultTick || heard > leaderTimeout+node.DefaultTick {
			t.Errorf("heard_ago %v, want the time-out %v to within a tick", heard, leaderTimeout)
		}
		if v := rec.attrs["reason"]; v.String() != "leader_silent" {
			t.Errorf("reason %v, want leader_silent", v)
		}
		if lag := rec.duration(t, "late"); lag != 0 {
			t.Errorf("late %v, want 0: the follower's timer fired on time", lag)
		}
		for _, key := range []string{"timer_lag_max", "loop_lag_max", "state_write_max"} {
			rec.duration(t, key)
		}
		if _, ok := rec.attrs["pending"]; !ok {
			t.Errorf("no pending in %v", rec.attrs)
		}
		reg := follower.Registry()
		if v := metric(t, reg, "election_suspicions_total", "reason", "leader_silent"); v != 1 {
			t.Errorf("election_suspicions_total{reason=leader_silent} = %v, want 1", v)
		}
		if v := metric(t, reg, "election_suspicions_total", "reason", "node_late"); v != 0 {
			t.Errorf("election_suspicions_total{reason=node_late} = %v, want 0", v)
		}
	})
}

// stallFollower stalls node 1's loop for stall from its next commit (the
// one after the leader's next heartbeat), and holds the leader's writes
// from the same instant: the whole host stops. It returns when the stall
// began.
func stallFollower(t *testing.T, s *sim, clock *stallClock, stall time.Duration) time.Time {
	t.Helper()
	clock.armed.Store(int64(stall))
	var began time.Time
	select {
	case began = <-clock.stalled:
	case <-time.After(waitLimit):
		t.Fatal("node 1 did not stall")
	}
	s.nodes[2].conn.Hold()
	return began
}

// A follower whose own loop was stalled past its deadline, and whose
// leader's heartbeat arrived (late, the host being stalled) while the loop
// was still stalled, takes that heartbeat before it decides: the leader
// is alive, the node itself was late. Without that, the late tick is
// applied first and the live leader is timed out with its heartbeat in
// the queue.
func TestLateNodeTakesPendingHeartbeatFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, follower, clock, logs, term := pair(t)
		began := stallFollower(t, s, clock, leaderTimeout+10*node.DefaultTick)
		// The leader's held heartbeat leaves after node 1's deadline,
		// before node 1's loop runs again.
		time.Sleep(time.Until(began.Add(leaderTimeout + 5*node.DefaultTick)))
		s.nodes[2].conn.Release()
		synctest.Wait()
		time.Sleep(2 * leaderTimeout)
		synctest.Wait()
		reg := follower.Registry()
		if v := metric(t, reg, "election_leader_timeouts_total"); v != 0 {
			t.Errorf("node 1 timed its live leader out %v times (%d records), want never", v, len(logs.named("leader timed out")))
		}
		if err := s.follows(2, term); err != nil {
			t.Error(err)
		}
		if v := metric(t, reg, "election_deadlines_withheld_total", "outcome", "heard"); v != 1 {
			t.Errorf("election_deadlines_withheld_total{outcome=heard} = %v, want 1", v)
		}
	})
}

// A whole-host stall: the follower and its leader stop together, and the
// leader's next heartbeat leaves only after the follower runs again. The
// follower, late itself, withholds its time-out for a heartbeat interval,
// in which the heartbeat arrives.
func TestLateNodeWithholdsTimeoutForAHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, follower, clock, logs, term := pair(t)
		stall := leaderTimeout + 10*node.DefaultTick
		began := stallFollower(t, s, clock, stall)
		time.Sleep(time.Until(began.Add(stall + 2*node.DefaultTick)))
		s.nodes[2].conn.Release()
		synctest.Wait()
		time.Sleep(2 * leaderTimeout)
		synctest.Wait()
		reg := follower.Registry()
		if v := metric(t, reg, "election_leader_timeouts_total"); v != 0 {
			t.Errorf("node 1 timed its live leader out %v times (%d records), want never", v, len(logs.named("leader timed out")))
		}
		if err := s.follows(2, term); err != nil {
			t.Error(err)
		}
	})
}

// A follower stalled past its deadline whose leader is really gone still
// times it out, one heartbeat interval (and the lateness bound) later,
// and its evidence shows that it was late itself: how late it reached
// its deadline and how long it withheld the time-out.
func TestLateNodeStillTimesOutAHungLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, follower, clock, logs, _ := pair(t)
		stall := leaderTimeout + 10*node.DefaultTick
		began := stallFollower(t, s, clock, stall)
		ch := s.observer()
		awaitLeader(t, ch, 1) // the leader stays held
		synctest.Wait()
		got := logs.named("leader timed out")
		if len(got) != 1 {
			t.Fatalf("%d records of the time-out, want 1", len(got))
		}
		rec := got[0]
		t.Logf("%s: %v", rec.msg, rec.attrs)
		if v := rec.attrs["reason"]; v.String() != "node_late" {
			t.Errorf("reason %v, want node_late", v)
		}
		// The first deadline in the stall was the probe's, T before the
		// time-out after the stall began; the loop ran again at the
		// stall's end.
		late := rec.duration(t, "late")
		probeAt := leaderTimeout - time.Duration(seamTiming.AnswerTicks)*node.DefaultTick
		if want := began.Add(stall).Sub(began.Add(probeAt)); late < want-node.DefaultTick || late > want+node.DefaultTick {
			t.Errorf("late %v, want %v to within a tick", late, want)
		}
		if w := rec.duration(t, "withheld"); w <= 0 {
			t.Errorf("withheld %v, want the grace it waited", w)
		}
		if heard := rec.duration(t, "heard_ago"); heard < stall {
			t.Errorf("heard_ago %v, want at least the stall %v", heard, stall)
		}
		reg := follower.Registry()
		if v := metric(t, reg, "election_suspicions_total", "reason", "node_late"); v != 1 {
			t.Errorf("election_suspicions_total{reason=node_late} = %v, want 1", v)
		}
		if v := metric(t, reg, "election_deadlines_withheld_total", "outcome", "expired"); v != 1 {
			t.Errorf("election_deadlines_withheld_total{outcome=expired} = %v, want 1", v)
		}
	})
}
