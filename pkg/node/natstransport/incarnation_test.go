package natstransport_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
)

// startClocked runs node id of c, unsigned, with its wall clock now and
// its data in dir.
func startClocked(t *testing.T, c *cluster, id uint64, now func() time.Time, dir string) *running {
	t.Helper()
	nc := connect(t, c.url)
	n, err := natsnode.New(nc, natsnode.Config{
		Node: node.Config{
			Cluster:   c.name,
			Algorithm: c.algorithm,
			Election:  election.Config{ID: id, Members: c.members, Timing: testTiming},
			DataDir:   dir,
			Logger:    testLogger().With("node", id, "cluster", c.name),
			Now:       now,
		},
	})
	return run(t, n, nc, err)
}

// incarnation is the incarnation stored in the data directory dir.
func incarnation(t *testing.T, dir string) uint64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Incarnation uint64 `json:"incarnation"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st.Incarnation
}

// A node restarted without its data on a host whose clock is behind the
// old process's start (within the clocks' agreement) has a lower
// incarnation than the old process: the others take it for a new process
// once the old one has been silent for twice MaxMessageAge, and it leads
// again. Before, they dropped its every message as a replay, for good.
func TestRestartWithLowerIncarnationIsHeard(t *testing.T) {
	url := batontest.StartNATS(t)
	c := &cluster{url: url, name: "lowinc", algorithm: protocol.Bully, members: []uint64{1, 2, 3}}
	nodes := map[uint64]*running{1: c.start(t, 1), 2: c.start(t, 2)}
	awaitAgreement(t, nodes, 2)
	ahead := func() time.Time { return time.Now().Add(1500 * time.Millisecond) }
	oldDir, newDir := t.TempDir(), t.TempDir()
	nodes[3] = startClocked(t, c, 3, ahead, oldDir)
	awaitAgreement(t, nodes, 3)
	before := incarnation(t, oldDir)
	nodes[3].crash(t)
	nodes[3] = startClocked(t, c, 3, time.Now, newDir) // a new host, its clock true
	if after := incarnation(t, newDir); after >= before {
		t.Fatalf("incarnation of the new process %d, want below the old one's %d", after, before)
	}
	// The others hear its heartbeats: in Bully only a leader sends them,
	// and only the new process of 3 runs.
	beats := func(id uint64) float64 {
		return counter(t, nodes[id].Registry(), "election_messages_received_total", "type", string(protocol.TypeHeartbeat))
	}
	from := map[uint64]float64{1: beats(1), 2: beats(2)}
	batontest.CheckFor(t, 10*time.Second, func() error {
		for id, n := range from {
			if got := beats(id); got < n+2 {
				return fmt.Errorf("node %d: %v heartbeats since node 3 restarted", id, got-n)
			}
		}
		return nil
	})
	awaitAgreement(t, nodes, 3)
}
