// Package natsnode runs nodes of pkg/node over NATS. From a connection
// and the NATS settings it builds what node.New receives (node.Deps): the
// NATS adapter of pkg/node/natstransport, what the cluster answers at
// start (natstransport.Cluster) and the machines of the election's
// algorithm with the member keys (pkg/machines). It checks the settings
// that are NATS's alone, once: member keys, the age of messages, the
// pending limits, connection events. The node service, the examples and
// applications that embed a node start it here; node.New itself knows no
// NATS.
//
// A Group runs many elections of one member process over one connection
// (node.Group): NewGroup builds what the elections share on the
// connection (natstransport.Shared), which node.NewGroup receives
// (node.GroupDeps), and its Add builds each election's adapter on the
// group's connection. node.Group knows no NATS either.
package natsnode

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/machines"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natstransport"
	"github.com/baton-election/baton/pkg/signing"
)

// Defaults of Config.
const (
	DefaultMaxMessageAge = 2 * time.Second
	// DefaultPendingMsgs and DefaultPendingBytes bound what NATS may hold
	// for each subscription before the node's callback takes it.
	DefaultPendingMsgs  = natstransport.DefaultPendingMsgs
	DefaultPendingBytes = natstransport.DefaultPendingBytes
)

// Config configures a node over NATS: the node's own settings and those
// of its NATS connection.
type Config struct {
	// Node is the node's own configuration.
	Node node.Config
	// Signer is this node's member key (its ELECTION_KEY_FILE), and Keys
	// the public keys of every member (ELECTION_KEYS_FILE): both or
	// neither. With them, the node signs everything it publishes
	// (messages, announcements, query answers), and drops, as forged,
	// every message not signed by the member it names, and connection
	// events whose user key is not the member's. Without them, messages
	// are neither signed nor checked.
	Signer *signing.Signer
	Keys   *signing.MemberKeys
	// MemberSet is, for the byzantine algorithm with dynamic membership,
	// version 0 of the member set: the configured members and their keys
	// (ELECTION_KEYS_FILE). The members it does not list join with their
	// credentials (Keys from signing.NewAuthorityKeys, Signer with its
	// credential), and the set changes by the members' certified
	// decisions (package byzantine).
	MemberSet *signing.MemberKeys
	// MaxMessageAge is how far a message's timestamp may be from this
	// node's clock, either way, for the message to be accepted: it bounds
	// both the replay of a captured message to a node started since and
	// the clock skew between nodes. DefaultMaxMessageAge if zero.
	MaxMessageAge time.Duration
	// PendingMsgs and PendingBytes bound what NATS holds for each
	// subscription; DefaultPendingMsgs and DefaultPendingBytes if zero.
	PendingMsgs, PendingBytes int
	// ConnectionEvents is node.ConnectionEventsAuto (the default, if
	// empty) or node.ConnectionEventsOff: whether the node follows the
	// NATS server's connection events to notice at once that a member's
	// connection closed (see pkg/node/natstransport and
	// internal/natsconf).
	ConnectionEvents string
	// Probe, if set, opens a connection to the node's NATS server under
	// the given connection name and closes it. The node uses it at start
	// to check that the server delivers connection events, and logs and
	// exports (election_connection_events) whether it does.
	Probe func(ctx context.Context, name string) error
}

// New checks cfg and returns a node on nc: on the NATS adapter, asking
// the cluster for its term over nc as it starts, running the machine of
// cfg.Node.Algorithm. It starts nothing; the node's Run owns nc from the
// moment it is called.
func New(nc *nats.Conn, cfg Config) (*node.Node, error) {
	deps, err := deps(nc, cfg, nil, nil)
	if err != nil {
		return nil, err
	}
	return node.New(cfg.Node, deps)
}

// deps checks cfg's NATS settings and builds the node's dependencies on
// nc: on a connection shared with other elections if shared is not nil
// (Group), counting on m, the group's metrics, if not nil.
func deps(nc *nats.Conn, cfg Config, shared *natstransport.Shared, m *node.Metrics) (node.Deps, error) {
	if nc == nil {
		return node.Deps{}, fmt.Errorf("%w: no NATS connection", node.ErrConfig)
	}
	c := cfg.Node
	ecfg := c.Election
	ecfg.State = election.HardState{}
	members, err := ecfg.Validate()
	if err != nil {
		return node.Deps{}, fmt.Errorf("%w: %w", node.ErrConfig, err)
	}
	keys, err := cfg.check(members)
	if err != nil {
		return node.Deps{}, fmt.Errorf("%w: %w", node.ErrConfig, err)
	}
	setDefault(&cfg.MaxMessageAge, DefaultMaxMessageAge)
	setDefault(&cfg.PendingMsgs, DefaultPendingMsgs)
	setDefault(&cfg.PendingBytes, DefaultPendingBytes)
	if m == nil {
		m = node.NewMetrics()
	}
	learn := c.LearnTimeout
	setDefault(&learn, node.DefaultLearnTimeout)
	adapter, err := natstransport.New(nc, natstransport.Config{
		Cluster:          c.Cluster,
		Algorithm:        c.Algorithm,
		ID:               c.Election.ID,
		Members:          members,
		Dynamic:          c.Election.Dynamic,
		MaxPayload:       c.Algorithm.MaxPayload(),
		Signer:           cfg.Signer,
		Keys:             keys,
		MaxMessageAge:    cfg.MaxMessageAge,
		PendingMsgs:      cfg.PendingMsgs,
		PendingBytes:     cfg.PendingBytes,
		ConnectionEvents: cfg.ConnectionEvents != node.ConnectionEventsOff,
		Probe:            cfg.Probe,
		ProbeTimeout:     learn,
		ShutdownTimeout:  c.ShutdownTimeout,
		Now:              c.Now,
		Logger:           c.Logger,
		Meter:            m,
		Shared:           shared,
	})
	if err != nil {
		return node.Deps{}, fmt.Errorf("%w: %w", node.ErrConfig, err)
	}
	cluster := natstransport.Cluster{NC: nc, Name: c.Cluster, Keys: keys}
	if shared != nil {
		cluster.Streams = shared.Streams()
	}
	return node.Deps{
		Transport: adapter,
		Cluster:   cluster,
		Machines: machines.Factory{Algorithm: c.Algorithm, Cluster: c.Cluster, Signer: cfg.Signer, Keys: keys,
			MemberSet: cfg.MemberSet}.New,
		Metrics: m,
	}, nil
}

// check checks the NATS settings of cfg against its node's, of the given
// members, and returns the members' keys stating the node's cluster and
// algorithm (nil without keys).
func (cfg Config) check(members []uint64) (*signing.MemberKeys, error) {
	c := cfg.Node
	switch cfg.ConnectionEvents {
	case "", node.ConnectionEventsAuto, node.ConnectionEventsOff:
	default:
		return nil, fmt.Errorf("connection events %q: want %q or %q", cfg.ConnectionEvents, node.ConnectionEventsAuto, node.ConnectionEventsOff)
	}
	if cfg.MaxMessageAge < 0 || cfg.PendingMsgs < 0 || cfg.PendingBytes < 0 {
		return nil, fmt.Errorf("negative duration or size")
	}
	if (cfg.Signer == nil) != (cfg.Keys == nil) {
		return nil, fmt.Errorf("a member key needs the members' keys, and they need it")
	}
	if cfg.Signer == nil {
		if c.Algorithm.NeedsKeys() {
			return nil, fmt.Errorf("%s needs member keys", c.Algorithm)
		}
		return nil, nil
	}
	if cfg.Signer.ID() != c.Election.ID {
		return nil, fmt.Errorf("the key is member %d's, this node is %d", cfg.Signer.ID(), c.Election.ID)
	}
	if err := cfg.Keys.Check(members, cfg.Signer); err != nil {
		return nil, err
	}
	// The keys state the cluster and algorithm this node runs, so that
	// what reads announcements for it (the start's learning of the term)
	// knows them; a file that states others is refused.
	return cfg.Keys.State(c.Cluster, c.Algorithm)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
