package node

import (
	"log/slog"
	"os"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/node/transport"
)

// testTiming is the timing of the package's own tests.
var testTiming = election.Timing{
	HeartbeatTicks:     5,
	LeaderTimeoutTicks: 50,
	AnswerTicks:        5,
	CoordinatorTicks:   30,
	LeaseTicks:         election.DefaultLeaseTicks,
	LeaderLeaseTicks:   election.LeaderLease(election.DefaultLeaseTicks, election.DefaultMaxDrift),
}

func electionConfig(id uint64, members []uint64) election.Config {
	return election.Config{ID: id, Members: members, Timing: testTiming}
}

// testLogger discards logs unless NODE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("NODE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// endpoint is member id's endpoint on a network of its own, for a node
// that is never run.
func endpoint(id uint64) *transport.Endpoint { return transport.NewNetwork().Join(id) }

// newTestNode is New on tr, asking cluster for its term, with the
// machines of cfg's algorithm.
func newTestNode(tr transport.Transport, cluster TermSource, cfg Config) (*Node, error) {
	return New(cfg, Deps{Transport: tr, Cluster: cluster, Machines: machines.Factory{Algorithm: cfg.Algorithm, Cluster: cfg.Cluster}.New})
}
