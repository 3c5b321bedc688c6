package natsnode

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node"
)

// Group is a node.Group over a NATS connection whose Add builds each
// election's adapter on the group's connection.
type Group struct {
	*node.Group
	nc *nats.Conn
}

// NewGroup returns an empty group of elections over nc (node.NewGroup).
// It starts nothing.
func NewGroup(nc *nats.Conn, cfg node.GroupConfig) (*Group, error) {
	g, err := node.NewGroup(nc, cfg)
	if err != nil {
		return nil, err
	}
	return &Group{Group: g, nc: nc}, nil
}

// Add checks cfg and adds its election to the group (node.Group.Add),
// and starts it at once if the group runs. Its ConnectionEvents, if
// empty, are the group's, and must be; it has member keys if the group
// has, and only then (they sign and check the batches); its Probe is not
// used: the group probes, once. Its Logger, if nil, is the group's tagged
// with the cluster.
func (g *Group) Add(cfg Config) (*node.Node, error) {
	gc := g.Config()
	if cfg.ConnectionEvents == "" {
		cfg.ConnectionEvents = gc.ConnectionEvents
	}
	if (cfg.Keys == nil) != (gc.Keys == nil) {
		return nil, fmt.Errorf("%w: an election with member keys needs a group with them, and one without none (they sign and check the batches)", node.ErrConfig)
	}
	if cfg.ConnectionEvents != gc.ConnectionEvents {
		return nil, fmt.Errorf("%w: connection events %q in a group with %q", node.ErrConfig, cfg.ConnectionEvents, gc.ConnectionEvents)
	}
	if cfg.Node.Logger == nil {
		cfg.Node.Logger = gc.Logger.With("cluster", cfg.Node.Cluster)
	}
	cfg.Probe = nil // the group probes, once
	deps, err := deps(g.nc, cfg, g.Shared(), g.Metrics())
	if err != nil {
		return nil, err
	}
	return g.Group.Add(cfg.Node, deps)
}
