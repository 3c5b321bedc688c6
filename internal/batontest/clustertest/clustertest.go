// Package clustertest starts clusters of real election nodes (pkg/node
// running pkg/bully or pkg/ring) in the test's process, for the tests of
// the packages that follow or record their leaders. Only tests import it.
//
// It is apart from batontest because it imports pkg/node, whose own tests
// import batontest.
package clustertest

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Option changes the configuration of the nodes Start runs.
type Option func(*natsnode.Config)

// WithKeys gives each node its member key from signers (by ID) and the
// members' public keys: they sign every message and announcement, and
// check what they receive (batontest.MemberKeys makes both). The nodes
// still connect to NATS as Start's caller lets them.
func WithKeys(signers map[uint64]*signing.Signer, keys *signing.MemberKeys) Option {
	return func(c *natsnode.Config) { c.Signer, c.Keys = signers[c.Node.Election.ID], keys }
}

// Start runs one node for each of members, in that order, as cluster
// named cluster with algorithm and the default timing, each on its own
// connection to the NATS server at url. The nodes log nothing.
//
// It returns a stop function for each node by ID: stop cancels the node's
// context, as SIGTERM does (a leader resigns), and waits until Run has
// returned; it is idempotent. Every node still running is stopped when the
// test ends, before its connection is closed.
func Start(t testing.TB, url, cluster string, algorithm protocol.Algorithm, members []uint64, opts ...Option) map[uint64]func() {
	t.Helper()
	stops := make(map[uint64]func(), len(members))
	for _, id := range members {
		cfg := natsnode.Config{Node: node.Config{
			Cluster:   cluster,
			Algorithm: algorithm,
			Election:  election.Config{ID: id, Members: members, Timing: election.DefaultTiming(len(members))},
			DataDir:   t.TempDir(),
			Logger:    slog.New(slog.DiscardHandler),
		}}
		for _, opt := range opts {
			opt(&cfg)
		}
		n, err := natsnode.New(batontest.Connect(t, url), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		stops[id] = sync.OnceFunc(func() { cancel(); <-done })
		t.Cleanup(stops[id])
	}
	return stops
}
