package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/protocol"
)

// Connection events: when a client's connection closes, the NATS server
// publishes $SYS.ACCOUNT.<account>.DISCONNECT with the client's connection
// name within a millisecond or two, where a peer notices missing heartbeats
// only after the leader time-out. A deployment delivers these events to the
// application account by exporting them from the system account and
// importing them under the same subject names (see internal/natsconf); a node
// then subscribes to $SYS.ACCOUNT.*.DISCONNECT and reports every member
// whose connection closed to its machine as down (election.Machine.PeerDown).
//
// Heartbeats stay: they detect a hung process, whose connection stays open,
// and they are all there is where the server does not deliver the events.

// ConnectionEvents modes of Config.ConnectionEvents.
const (
	// ConnectionEventsAuto subscribes to the connection events and, with a
	// Config.Probe, checks at start that the server delivers them.
	ConnectionEventsAuto = "auto"
	// ConnectionEventsOff ignores them: failures are detected by the
	// heartbeats alone.
	ConnectionEventsOff = "off"
)

// Subjects of the connection events, as seen from the application account.
const (
	connectSubject    = "$SYS.ACCOUNT.*.CONNECT"
	disconnectSubject = "$SYS.ACCOUNT.*.DISCONNECT"
)

// maxEventSize bounds a connection event's payload; the server's are a
// few hundred bytes.
const maxEventSize = 16 << 10

// connEvent is the part of a server's connect or disconnect event the node
// reads.
type connEvent struct {
	Client struct {
		Start time.Time `json:"start"`
		Name  string    `json:"name"`
		// User is the user the client authenticated as: its public key,
		// U…, for an nkey user.
		User string `json:"user"`
	} `json:"client"`
}

// connections follows the connection events of a node's peers.
type connections struct {
	mu     sync.Mutex
	latest map[uint64]time.Time // start of the newest connection seen per member
	probe  string               // connection name of the probe
	seen   chan struct{}        // closed when the first event arrives, whoever it is about
	once   sync.Once
}

// subscribeEvents subscribes to the connection events unless they are off.
func (n *Node) subscribeEvents() ([]Subscription, error) {
	if n.cfg.ConnectionEvents == ConnectionEventsOff {
		return nil, nil
	}
	n.conns = &connections{
		latest: make(map[uint64]time.Time, len(n.members)),
		probe:  protocol.ProbeConnectionName(n.cfg.Cluster, n.id),
		seen:   make(chan struct{}),
	}
	var subs []Subscription
	for _, subject := range []string{connectSubject, disconnectSubject} {
		connect := subject == connectSubject
		sub, err := n.nc.Subscribe(subject, n.cfg.PendingMsgs, n.cfg.PendingBytes, func(msg *nats.Msg) { n.onConnEvent(msg, connect) })
		if err != nil {
			return subs, fmt.Errorf("node: subscribe %s: %w", subject, err)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// probeGrace is how long a node waits for a connection event of any
// client before it opens the probe connection: when a cluster starts, the
// members' own connections bring events at once, and 101 nodes each
// opening and closing a probe would send 2·101·101 more.
const probeGrace = 200 * time.Millisecond

// probeEvents checks that the server delivers connection events: any event
// within probeGrace shows it; failing that, the probe opens and closes a
// connection named after this node's probe, and an event about it must
// arrive within the learning time-out. It logs the mode in effect (the
// election_connection_events gauge is set by the first event). It runs
// while the node learns the cluster's term, before the machine starts.
func (n *Node) probeEvents(ctx context.Context) {
	if n.conns == nil {
		n.log.Info("connection events off: failures are detected by heartbeats alone")
		return
	}
	inEffect := func() {
		n.log.Info("connection events in effect: a member's closed connection is noticed at once; heartbeats detect hangs")
	}
	grace := time.NewTimer(probeGrace)
	defer grace.Stop()
	select {
	case <-n.conns.seen:
		inEffect()
		return
	case <-ctx.Done():
		return
	case <-grace.C:
	}
	if n.cfg.Probe == nil {
		n.log.Info("connection events subscribed, none seen yet and no probe: failures are detected by heartbeats until one arrives")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.LearnTimeout)
	defer cancel()
	if err := n.cfg.Probe(ctx, n.conns.probe); err != nil {
		n.log.Warn("connection events: the probe connection failed; failures are detected by heartbeats until an event arrives", "err", err)
		return
	}
	select {
	case <-n.conns.seen:
		inEffect()
	case <-ctx.Done():
		n.log.Warn("connection events: the NATS server delivered none for a probe connection; failures are detected by heartbeats alone (see the NATS configuration in docs)",
			"waited", n.cfg.LearnTimeout)
	}
}

// onConnEvent handles one connection event. A member's closed connection
// is queued for the machine, with the claims so that nothing delays it,
// unless a newer connection of that member is known: an old connection's
// close, reported late, says nothing about the process that replaced it.
// The connection name is the client's choice: with member keys, an event
// counts only if the client authenticated as the member's nkey user (the
// event's client.user is the member's public key). The server must list
// the members as nkey users: where it has none, it ignores a key a client
// claims and reports it all the same.
func (n *Node) onConnEvent(msg *nats.Msg, connect bool) {
	if n.stopping.Load() || len(msg.Data) > maxEventSize {
		return
	}
	var e connEvent
	if err := json.Unmarshal(msg.Data, &e); err != nil {
		n.log.Debug("undecodable connection event", "subject", msg.Subject, "err", err)
		return
	}
	c := n.conns
	c.once.Do(func() {
		close(c.seen)
		n.metrics.connectionEvents.Set(1)
	})
	cluster, id, ok := protocol.ParseConnectionName(e.Client.Name)
	if !ok || cluster != n.cfg.Cluster || id == n.id || !n.isMember(id) {
		return
	}
	if n.cfg.Keys != nil {
		if public, _ := n.cfg.Keys.PublicKey(id); e.Client.User != public {
			n.drop(protocol.ReasonSignature, msg.Subject, fmt.Errorf("connection event names member %d, whose key it does not carry (user %q)", id, e.Client.User))
			return
		}
	}
	if !c.down(id, e.Client.Start, connect) {
		return
	}
	n.metrics.peerDisconnects.Inc()
	select {
	case n.claims <- event{down: id, at: time.Now()}:
	default:
		n.drop(ReasonInboxFull, msg.Subject, nil)
	}
}

// down records a connection event of member id about its connection
// started at start, and reports whether it tells that the member is down:
// a disconnect, unless a newer connection of the member is known.
func (c *connections) down(id uint64, start time.Time, connect bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	latest, known := c.latest[id]
	newer := known && latest.After(start)
	if connect && !newer {
		c.latest[id] = start
	}
	return !connect && !newer
}

// isMember reports whether id is a member of the cluster.
func (n *Node) isMember(id uint64) bool {
	_, found := slices.BinarySearch(n.members, id)
	return found
}
