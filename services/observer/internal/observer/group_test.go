package observer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Processes with many elections each send their heartbeats in batches
// (one message for many elections): the observer reads each heartbeat of
// a batch as if it had arrived on its own, and keeps every election's
// leader current on them.
func TestBatchedHeartbeats(t *testing.T) {
	t.Run("unsigned", func(t *testing.T) { batchedHeartbeats(t, false) })
	t.Run("signed, keys for a range of clusters", func(t *testing.T) { batchedHeartbeats(t, true) })
}

func batchedHeartbeats(t *testing.T, signed bool) {
	clusters := []string{"shard-0", "shard-1", "shard-2", "shard-3", "shard-4"}
	var signers map[uint64]*signing.Signer
	var keys *signing.MemberKeys
	opts := []batontest.NATSOption{batontest.WithJetStream()}
	if signed {
		signers, keys = batontest.MemberKeys(t, 1, 2, 3)
		opts = []batontest.NATSOption{batontest.WithAccounts(), batontest.WithMemberUsers(keys), batontest.WithJetStream()}
	}
	url := batontest.StartNATS(t, opts...)
	data := t.TempDir()
	cfg := testConfig(url, data)
	// Below the elections' own heartbeat interval (1 s: ten times 100 ms,
	// with beats): the leaders are heard by their processes' beats.
	cfg.LeaderTimeout = 300 * time.Millisecond
	if signed {
		// One keys file for the five clusters, named as the processes'
		// ELECTION_CLUSTERS.
		dir := t.TempDir()
		var file strings.Builder
		file.WriteString(signing.StatementPrefix + " algorithm bully\n")
		for _, id := range keys.IDs() {
			public, _ := keys.PublicKey(id)
			fmt.Fprintf(&file, "%d %s\n", id, public)
		}
		if err := os.WriteFile(filepath.Join(dir, "shard-{0..4}.keys"), []byte(file.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadKeys(dir)
		if err != nil || len(loaded) != len(clusters) {
			t.Fatalf("LoadKeys of shard-{0..4}.keys: %d clusters, %v", len(loaded), err)
		}
		cfg.Keys = loaded
		cfg.NATS = natsconn.Config{URL: url, User: natsconf.ObserverUser, Password: natsconf.LocalPasswords.Observer}
	}
	o := startObserver(t, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	t.Cleanup(func() {
		cancel()
		for _, d := range done {
			<-d
		}
	})
	for id := uint64(1); id <= 3; id++ {
		conn := batontest.AsNode("shard-0", id)
		if signed {
			conn = batontest.AsMember("shard-0", signers[id])
		}
		nc := batontest.Connect(t, url, conn...)
		g, err := natsnode.NewGroup(nc, natsnode.GroupConfig{
			Node: node.GroupConfig{ID: id, Logger: testLogger(), Beat: 100 * time.Millisecond},
			Conn: "shard-0", Signer: signers[id], Keys: keys, BeatTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range clusters {
			timing := election.DefaultTiming(3)
			timing.LeaderTimeoutTicks *= 5
			if _, err := g.Add(natsnode.Config{Node: node.Config{Cluster: c, Algorithm: protocol.Bully, DataDir: t.TempDir(),
				Election: election.Config{ID: id, Members: []uint64{1, 2, 3}, Timing: timing}}, Signer: signers[id], Keys: keys}); err != nil {
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
	o.waitFor(t, "two rounds of batched heartbeats", func() bool {
		return o.liveCount("heartbeat") >= heartbeats+2*float64(len(clusters))
	})
	if o.liveCount(protocol.KindBeat) == 0 {
		t.Error("no beat observed")
	}
	for _, c := range clusters {
		file, err := os.ReadFile(filepath.Join(data, c+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(file), `"kind":"end"`) {
			t.Errorf("%s: a leadership ended while its leader's process beat:\n%s", c, file)
		}
	}
	for _, c := range clusters {
		h, _ := o.store.Cluster(c)
		if l, ok := h.Current(); !ok || l.Leader != 3 {
			t.Errorf("%s: current %+v, %v; want node 3 still leading on its batched heartbeats", c, l, ok)
		}
	}
	if n := counter(o.metrics.live.WithLabelValues(protocol.KindBatch, "invalid")); n != 0 {
		t.Errorf("%v batches or messages of batches rejected as invalid", n)
	}
	for _, result := range []string{"invalid", resultBadSignature} {
		if n := counter(o.metrics.live.WithLabelValues(protocol.KindBeat, result)); n != 0 {
			t.Errorf("%v beats rejected: %s", n, result)
		}
	}
}
