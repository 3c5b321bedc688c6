package natsnode

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natstransport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// GroupConfig configures a Group: the group's own settings and those of
// the NATS connection its elections share.
type GroupConfig struct {
	// Node is the group's own configuration. With Node.Beat, the
	// connection beats every Node.Beat.
	Node node.GroupConfig
	// Conn is the cluster after which the processes of the deployment
	// name their NATS connections (protocol.ConnectionName(Conn, ID)):
	// the same for every process of the deployment, such as the first
	// cluster of ELECTION_CLUSTERS. A connection event about it counts in
	// every election of the group.
	Conn string
	// ConnectionEvents and Probe: as in Config, once for the connection;
	// each election's must give the same ConnectionEvents.
	ConnectionEvents string
	Probe            func(ctx context.Context, name string) error
	// Batch is how long the elections' messages wait to leave together
	// in batches (natstransport.SharedConfig.Batch):
	// natstransport.DefaultBatchWindow if zero; negative, each leaves on
	// its own.
	Batch time.Duration
	// Signer and Keys sign and check the batches: the member's key and
	// the members' keys, as in the elections' Config; both or neither.
	Signer *signing.Signer
	Keys   *signing.MemberKeys
	// BeatTimeout is how long a member heard beating (Node.Beat) may
	// fall silent before each election is told that it is down, as when
	// its connection closes (natstransport.SharedConfig.BeatTimeout); it
	// must exceed Node.Beat.
	BeatTimeout time.Duration
}

// Group is a node.Group over a NATS connection whose Add builds each
// election's adapter on the group's connection.
type Group struct {
	*node.Group
	nc     *nats.Conn
	cfg    GroupConfig
	shared *natstransport.Shared
}

// NewGroup checks cfg and returns an empty group of elections over nc
// (node.NewGroup), on the connection's shared subscriptions, batches and
// beats (natstransport.Shared). It starts nothing; the group's Run owns
// nc from the moment it is called, and drains it as it returns.
func NewGroup(nc *nats.Conn, cfg GroupConfig) (*Group, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", node.ErrConfig)
	}
	c := cfg.Node
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := protocol.ValidateCluster(cfg.Conn); err != nil {
		return nil, fmt.Errorf("%w: the connection's cluster: %w", node.ErrConfig, err)
	}
	switch cfg.ConnectionEvents {
	case "":
		cfg.ConnectionEvents = node.ConnectionEventsAuto
	case node.ConnectionEventsAuto, node.ConnectionEventsOff:
	default:
		return nil, fmt.Errorf("%w: connection events %q: want %q or %q", node.ErrConfig, cfg.ConnectionEvents, node.ConnectionEventsAuto, node.ConnectionEventsOff)
	}
	if c.Beat > 0 && cfg.BeatTimeout <= c.Beat {
		return nil, fmt.Errorf("%w: beat interval %v and time-out %v: the time-out must exceed the interval", node.ErrConfig, c.Beat, cfg.BeatTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	shared, err := natstransport.NewShared(nc, natstransport.SharedConfig{
		Conn: cfg.Conn, ID: c.ID, ConnectionEvents: cfg.ConnectionEvents == node.ConnectionEventsAuto,
		Probe: cfg.Probe, ProbeTimeout: node.DefaultLearnTimeout, Logger: c.Logger,
		Batch: cfg.Batch, Signer: cfg.Signer, Keys: cfg.Keys,
		Beat: c.Beat, BeatTimeout: cfg.BeatTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", node.ErrConfig, err)
	}
	g, err := node.NewGroup(c, node.GroupDeps{Conn: groupConn{Shared: shared, nc: nc, log: c.Logger}})
	if err != nil {
		return nil, err
	}
	cfg.Node = g.Config()
	return &Group{Group: g, nc: nc, cfg: cfg, shared: shared}, nil
}

// Config is the group's configuration, with its defaults.
func (g *Group) Config() GroupConfig { return g.cfg }

// Shared is the group's connection, on which the transports of its
// elections are built (natstransport.Config.Shared).
func (g *Group) Shared() *natstransport.Shared { return g.shared }

// Add checks cfg and adds its election to the group (node.Group.Add),
// and starts it at once if the group runs. Its ConnectionEvents, if
// empty, are the group's, and must be; it has member keys if the group
// has, and only then (they sign and check the batches); its Probe is not
// used: the group probes, once. Its Logger, if nil, is the group's tagged
// with the cluster.
func (g *Group) Add(cfg Config) (*node.Node, error) {
	gc := g.cfg
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
		cfg.Node.Logger = gc.Node.Logger.With("cluster", cfg.Node.Cluster)
	}
	cfg.Probe = nil // the group probes, once
	deps, err := deps(g.nc, cfg, g.shared, g.Metrics())
	if err != nil {
		return nil, err
	}
	return g.Group.Add(cfg.Node, deps)
}

// groupConn is the group's NATS connection as node.Group uses it: the
// shared subscriptions, batches and beats, and the connection itself,
// which the group drains as its Run returns.
type groupConn struct {
	*natstransport.Shared
	nc  *nats.Conn
	log *slog.Logger
}

func (c groupConn) Connected() bool { return c.nc.IsConnected() }

func (c groupConn) Close() { c.nc.Close() }

// Drain drains and closes the connection, waiting at most timeout.
func (c groupConn) Drain(timeout time.Duration) { natstransport.Drain(c.nc, timeout, c.log) }
