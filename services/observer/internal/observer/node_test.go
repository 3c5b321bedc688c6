package observer

import (
	"net/http"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/batontest/clustertest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// With real nodes: the observer keeps the leader current on its
// heartbeats, records a clean handover as a resign, and sees no split
// brain.
func TestWithRealNodes(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.LeaderTimeout = time.Second // above the nodes' 200 ms, for a loaded machine
	o := startObserver(t, cfg, nil)

	stops := clustertest.Start(t, url, "default", protocol.Ring, []uint64{1, 2, 3})
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
