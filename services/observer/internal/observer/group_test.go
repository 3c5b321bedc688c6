package observer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// Processes with many elections each send their heartbeats in batches
// (one message for many elections): the observer reads each heartbeat of
// a batch as if it had arrived on its own, and keeps every election's
// leader current on them.
func TestBatchedHeartbeats(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.LeaderTimeout = 2 * time.Second
	o := startObserver(t, cfg, nil)
	clusters := []string{"shard-0", "shard-1", "shard-2", "shard-3", "shard-4"}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	t.Cleanup(func() {
		cancel()
		for _, d := range done {
			<-d
		}
	})
	for id := uint64(1); id <= 3; id++ {
		nc := batontest.Connect(t, url, batontest.AsNode("shard-0", id)...)
		g, err := node.NewGroup(nc, node.GroupConfig{ID: id, Conn: "shard-0", Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range clusters {
			timing := election.DefaultTiming(3)
			timing.LeaderTimeoutTicks *= 5
			if _, err := g.Add(node.Config{Cluster: c, Algorithm: protocol.Bully, DataDir: t.TempDir(),
				Election: election.Config{ID: id, Members: []uint64{1, 2, 3}, Timing: timing}}); err != nil {
				t.Fatal(err)
			}
		}
		d := make(chan error, 1)
		done = append(done, d)
		go func() { d <- g.Run(ctx) }()
	}
	for _, c := range clusters {
		o.waitFor(t, fmt.Sprintf("node 3 to lead %s", c), func() bool {
			h, ok := o.store.Cluster(c)
			if !ok {
				return false
			}
			l, ok := h.Current()
			return ok && l.Leader == 3
		})
	}
	heartbeats := o.liveCount("heartbeat")
	o.waitFor(t, "batched heartbeats over a whole window", func() bool {
		return o.liveCount("heartbeat") >= heartbeats+float64(len(clusters))*float64(cfg.LeaderTimeout/(100*time.Millisecond))
	})
	for _, c := range clusters {
		h, _ := o.store.Cluster(c)
		if l, ok := h.Current(); !ok || l.Leader != 3 {
			t.Errorf("%s: current %+v, %v; want node 3 still leading on its batched heartbeats", c, l, ok)
		}
	}
	if n := counter(o.metrics.live.WithLabelValues(protocol.KindBatch, "invalid")); n != 0 {
		t.Errorf("%v batches or messages of batches rejected as invalid", n)
	}
}
