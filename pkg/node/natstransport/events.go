package natstransport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
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

// subscribeEvents subscribes to the connection events unless they are
// off; with a Shared connection, it has them handed over by it.
func (a *Adapter) subscribeEvents() error {
	if !a.cfg.ConnectionEvents {
		return nil
	}
	a.conns = &connections{
		latest: make(map[uint64]time.Time, len(a.cfg.Members)),
		probe:  probeName(a.cfg.Cluster, a.cfg.ID),
		seen:   make(chan struct{}),
	}
	if a.cfg.Shared != nil {
		a.cfg.Shared.add(a)
		return nil
	}
	for _, subject := range []string{connectSubject, disconnectSubject} {
		connect := subject == connectSubject
		if _, err := a.subscribe(subject, func(msg *nats.Msg) { a.onConnEvent(msg, connect) }); err != nil {
			return err
		}
	}
	return nil
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
func (a *Adapter) probeEvents(ctx context.Context) {
	if a.conns == nil {
		a.log.Info("connection events off: failures are detected by heartbeats alone")
		return
	}
	probeEvents(ctx, a.log, a.conns.seen, a.cfg.Probe, a.cfg.ProbeTimeout, a.conns.probe)
}

// probeName is the probe connection's name of member id of cluster.
func probeName(cluster string, id uint64) string { return protocol.ProbeConnectionName(cluster, id) }

// probeEvents waits for seen to be closed by a connection event, and after
// probeGrace opens and closes a probe connection named name to bring one,
// waiting at most timeout for it; it logs what it found.
func probeEvents(ctx context.Context, log *slog.Logger, seen <-chan struct{}, probe func(context.Context, string) error, timeout time.Duration, name string) {
	inEffect := func() {
		log.Info("connection events in effect: a member's closed connection is noticed at once; heartbeats detect hangs")
	}
	grace := time.NewTimer(probeGrace)
	defer grace.Stop()
	select {
	case <-seen:
		inEffect()
		return
	case <-ctx.Done():
		return
	case <-grace.C:
	}
	if probe == nil {
		log.Info("connection events subscribed, none seen yet and no probe: failures are detected by heartbeats until one arrives")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := probe(ctx, name); err != nil {
		log.Warn("connection events: the probe connection failed; failures are detected by heartbeats until an event arrives", "err", err)
		return
	}
	select {
	case <-seen:
		inEffect()
	case <-ctx.Done():
		log.Warn("connection events: the NATS server delivered none for a probe connection; failures are detected by heartbeats alone (see the NATS configuration in docs)",
			"waited", timeout)
	}
}

// onConnEvent handles one connection event. A member's closed connection
// is queued for the machine, with the claims so that nothing delays it,
// unless a newer connection of that member is known: an old connection's
// close, reported late, says nothing about the process that replaced it.
// The connection name is the client's choice: with member keys, an event
// counts only if the client authenticated as the member (eventUser). The
// server must list the members as nkey users, or check their credentials:
// where it does neither, no event about a member counts.
func (a *Adapter) onConnEvent(msg *nats.Msg, connect bool) {
	if len(msg.Data) > maxEventSize {
		return
	}
	var e connEvent
	if err := json.Unmarshal(msg.Data, &e); err != nil {
		a.log.Debug("undecodable connection event", "subject", msg.Subject, "err", err)
		return
	}
	a.connEvent(e, msg.Subject, connect)
}

// connEvent handles one decoded connection event, which arrived on
// subject.
func (a *Adapter) connEvent(e connEvent, subject string, connect bool) {
	c := a.conns
	if a.stopping.Load() || c == nil {
		return
	}
	c.once.Do(func() {
		close(c.seen)
		a.cfg.Meter.EventsDelivered()
	})
	cluster, id, ok := protocol.ParseConnectionName(e.Client.Name)
	if !ok || cluster != a.connCluster() || id == a.cfg.ID || !a.isMember(id) {
		return
	}
	if a.cfg.Keys != nil {
		if want, ok := eventUser(a.cfg.Keys, cluster, id); !ok || e.Client.User != want {
			a.drop(protocol.ReasonSignature, subject, fmt.Errorf("connection event names member %d, whose key it does not carry (user %.120q)", id, e.Client.User))
			return
		}
	}
	if !c.down(id, e.Client.Start, connect) {
		return
	}
	a.cfg.Meter.PeerDisconnected()
	a.lanes.Deliver(transport.Inbound{Kind: transport.PeerDown, Peer: id, At: time.Now()})
}

// connCluster is the cluster after which the members name their
// connections: the election's own, or the Shared connection's.
func (a *Adapter) connCluster() string {
	if a.cfg.Shared != nil {
		return a.cfg.Shared.cfg.Conn
	}
	return a.cfg.Cluster
}

// eventUser is the user that a connection event of member id of cluster
// must report, client.user, for the connection to be the member's, with
// keys: the member's nkey user, its public key, where the keys are a list
// (the server lists the members as nkey users); and with member
// credentials, protocol.MemberUser with the key of the member's latest
// verified message, the user the server's credential check
// (internal/natsauth) names a member it admitted with that key. Neither
// can be chosen by a client: the server reports a password user under
// its configured name and an nkey user under its key, and what a client
// puts in its connect message (a connection name, a JWT, a user name) is
// not reported in place of those. ok is false while the member's key is
// unknown: with credentials, before any of its messages verified.
func eventUser(keys *signing.MemberKeys, cluster string, id uint64) (user string, ok bool) {
	public, ok := keys.PublicKey(id)
	if !ok {
		return "", false
	}
	if keys.Authority() {
		return protocol.MemberUser(cluster, id, public), true
	}
	return public, true
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
func (a *Adapter) isMember(id uint64) bool {
	if a.cfg.Dynamic {
		return protocol.DynamicMember(id)
	}
	_, found := slices.BinarySearch(a.cfg.Members, id)
	return found
}
