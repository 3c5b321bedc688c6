package observer

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/batontest/clustertest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// With real nodes: the observer keeps the leader current on its
// heartbeats, records a clean handover as a resign, and sees no split
// brain.
func TestWithRealNodes(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.LeaderTimeout = 2 * time.Second // above the nodes' 1 s, for a loaded machine
	o := startObserver(t, cfg, nil)

	// Slow elections: on a machine busy with other tests (CI runs the
	// end-to-end containers beside this), a lower node's deferral of 2·T
	// with the default T of 50 ms can run out before the successor's claim
	// reaches it, and then two nodes claim; that is the algorithm on an
	// overloaded host, not what this test checks.
	slow := func(c *natsnode.Config) {
		c.Node.Election.Timing.AnswerTicks *= 5
		c.Node.Election.Timing.CoordinatorTicks *= 5
		c.Node.Election.Timing.LeaderTimeoutTicks *= 5
	}
	stops := clustertest.Start(t, url, "default", protocol.Ring, []uint64{1, 2, 3}, slow)
	current := func(leader uint64) func() bool {
		return func() bool {
			c, ok := o.store.Cluster("default")
			if !ok {
				return false
			}
			l, ok := c.Current()
			return ok && l.Leader == leader
		}
	}
	o.waitFor(t, "node 3 to lead", current(3))
	// Heartbeats keep it current for longer than the window.
	heartbeats := o.liveCount("heartbeat")
	o.waitFor(t, "heartbeats over a whole window", func() bool {
		return o.liveCount("heartbeat") >= heartbeats+float64(cfg.LeaderTimeout/(50*time.Millisecond))
	})
	var cur leadershipJSON
	if code := o.get(t, "/api/clusters/default/leader", &cur); code != http.StatusOK || cur.Leader != 3 || cur.Algorithm != protocol.Ring {
		t.Fatalf("leader = %d %v, want 200 and node 3 (ring)", code, cur)
	}

	stops[3]()
	o.waitFor(t, "node 2 to lead", current(2))
	c, _ := o.store.Cluster("default")
	for _, l := range c.Leaderships {
		if l.Leader == 3 && l.Term == cur.Term && l.EndReason != history.EndResign && l.EndReason != history.EndSuperseded {
			t.Errorf("node 3's leadership ended %q, want resign (or superseded, if the announcement came first)", l.EndReason)
		}
	}
	if len(c.SplitBrains) != 0 {
		t.Errorf("split brain in a clean handover: %+v", c.SplitBrains)
	}
	if n := counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, "invalid")); n != 0 {
		t.Errorf("%v node heartbeats rejected as invalid", n)
	}
}

// The observer subscribes only to the subjects it records, not to the
// query subject: while no node leads (every node gone, or during a
// failover), a query fails at once with "no responders" instead of waiting
// its time-out, and leader.Current then answers from the stream. The
// observer also follows a Paxos leader's lease renewals as heartbeats.
func TestQueryWithoutLeaderWhileObserving(t *testing.T) {
	srv := batontest.StartNATSServer(t, batontest.WithJetStream())
	url := srv.ClientURL()
	cfg := testConfig(url, t.TempDir())
	cfg.LeaderTimeout = time.Second
	o := startObserver(t, cfg, nil)
	client := batontest.Connect(t, url)

	if _, err := client.Request(protocol.QuerySubject("nobody"), nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("query for a cluster with no node, observer running: got %v, want %v", err, nats.ErrNoResponders)
	}

	stops := clustertest.Start(t, url, "px", protocol.Paxos, []uint64{1, 2, 3})
	o.waitFor(t, "node 3 to lead", func() bool {
		c, ok := o.store.Cluster("px")
		if !ok {
			return false
		}
		l, ok := c.Current()
		return ok && l.Leader == 3
	})
	// Lease renewals keep it current for longer than the window.
	heartbeats := o.liveCount("heartbeat")
	o.waitFor(t, "lease renewals over a whole window", func() bool {
		return o.liveCount("heartbeat") >= heartbeats+float64(cfg.LeaderTimeout/(50*time.Millisecond))
	})
	if c, _ := o.store.Cluster("px"); c.Leaderships[len(c.Leaderships)-1].Ended() {
		t.Fatalf("the leader's leadership ended while it renewed its lease: %+v", c.Leaderships)
	}

	for _, id := range []uint64{1, 2, 3} {
		stops[id]()
	}
	if _, err := client.Request(protocol.QuerySubject("px"), nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("query with every node gone, observer running: got %v, want %v", err, nats.ErrNoResponders)
	}
	a, err := leader.Current(t.Context(), client, "px")
	if err != nil || a.Leader == 0 {
		t.Fatalf("leader.Current with every node gone: got %+v, %v; want the stream's last announcement", a, err)
	}
}
