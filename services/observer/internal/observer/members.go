package observer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
	"github.com/baton-election/baton/services/observer/internal/membership"
)

// Dynamic membership: the members of a cluster come and go, with no list
// of them. The observer follows who is present from what the members
// broadcast (package membership holds the rules):
//
//   - a member joins with its first presence broadcast
//     (election.<cluster>.presence); the point-to-point answers to a
//     newcomer go to inboxes, which the observer does not read;
//   - any later broadcast of it, presence or another, refreshes it;
//   - it leaves when it resigns, when the NATS server reports its
//     connection closed ($SYS.ACCOUNT.<account>.DISCONNECT, where the
//     observer's account receives the connection events: see
//     internal/natsconf), or when it is not heard for
//     OBSERVER_MEMBER_TIMEOUT while the observer listens.
//
// Every message counts only once read by the observer's memberVerifier
// (signed by the member it names, with keys) and valid for a dynamic
// membership (protocol.ValidateFor with protocol.DynamicMember, on its
// own subject: protocol.CheckRoute). Joins and leaves are recorded in the
// cluster's history file as member events, so they survive a restart;
// the members present are kept in memory, and those present when the
// observer stopped are brought back (membership.Tracker.Restore).

// memberKinds are the broadcasts the observer reads only to refresh the
// members present: those it does not otherwise follow. They are read
// only for clusters with members.
var memberKinds = []string{protocol.KindElection, protocol.KindCoordinator, protocol.KindPrepare,
	string(protocol.TypeBzVote), string(protocol.TypeBzTimeout), string(protocol.TypeBzHello)}

// kindConnection is the kind, in observer_live_messages_total, of the
// NATS server's connection events.
const kindConnection = "connection"

// Subjects of the NATS server's connection events, as the application
// account receives them (internal/natsconf exports them there).
const (
	connectSubject    = "$SYS.ACCOUNT.*.CONNECT"
	disconnectSubject = "$SYS.ACCOUNT.*.DISCONNECT"
)

// maxConnEvent bounds a connection event the observer reads; the
// server's are a few hundred bytes.
const maxConnEvent = 16 << 10

// pageMemberEvents is how many joins and leaves the page shows per
// cluster.
const pageMemberEvents = 20

// Why a join is refused, the limit label of
// observer_membership_refused_total.
const (
	refusedMembers  = "members"
	refusedClusters = "clusters"
)

// memberVerifier tells whether a message or a connection is a member's.
// It is the one place where the observer checks who sent the members'
// messages (readMessage) and connections: keysVerifier checks them
// against each cluster's signing.MemberKeys, a list of keys or, for a
// cluster with member credentials, signing.NewAuthorityKeys (the key a
// message's credential binds, checked against the cluster's authority);
// another way of telling plugs in here (Observer.verify). Only the owner
// goroutine calls it.
type memberVerifier interface {
	// Message reads a message of cluster received on subject with
	// header h, and checks that the member it names sent it. An error
	// with protocol.ReasonSignature is a message that fails that check.
	Message(cluster, subject string, data []byte, h nats.Header) (protocol.Message, error)
	// Batched reads the message data of cluster, an entry of a batch
	// (protocol.ReadBatch) received on subject with header h, and
	// checks that the member it names signed the batch; signers caches
	// the verdict on the batch of each key that could have signed it,
	// for its other entries.
	Batched(cluster, subject string, batch []byte, h nats.Header, data []byte, signers map[string]batchSigner) (protocol.Message, error)
	// Connection checks that a connection the NATS server reports under
	// the name of member id of cluster is that member's: user is the
	// user it authenticated as (its public key, for an nkey user).
	Connection(cluster string, id uint64, user string) error
}

// keysVerifier checks the members' signatures against the member keys of
// each cluster (Config.Keys): nil believes everything; a cluster without
// keys, when others have some, is refused. Keys of member credentials
// (signing.NewAuthorityKeys) check each message's credential too.
type keysVerifier struct {
	keys map[string]*signing.MemberKeys
}

// Message checks the signature first, then decodes the message and
// checks that it names its signer.
func (v keysVerifier) Message(cluster, subject string, data []byte, h nats.Header) (protocol.Message, error) {
	keys, err := clusterKeys(v.keys, cluster)
	if err != nil {
		return protocol.Message{}, err
	}
	var signer uint64
	if keys != nil {
		if signer, err = keys.Verify(subject, data, h); err != nil {
			return protocol.Message{}, err
		}
	}
	msg, err := protocol.Decode(data)
	if err == nil && keys != nil {
		err = signing.CheckSigner(signer, msg.From)
	}
	return msg, err
}

// batchSigner is a set of keys' verdict on a batch's signature.
type batchSigner struct {
	id  uint64
	err error
}

// Batched checks the batch's signature under cluster's keys (once per
// key that could have signed it, through signers: the clusters of one
// deployment share their keys), then decodes the message and checks
// that it names the batch's signer.
func (v keysVerifier) Batched(cluster, subject string, batch []byte, h nats.Header, data []byte, signers map[string]batchSigner) (protocol.Message, error) {
	keys, err := clusterKeys(v.keys, cluster)
	if err != nil {
		return protocol.Message{}, err
	}
	var signer uint64
	if keys != nil {
		// The key of the member the batch names, in this cluster's
		// keys: the verdict holds for every cluster that lists that key.
		id, _ := strconv.ParseUint(h.Get(signing.SignerHeader), 10, 64)
		public, _ := keys.PublicKey(id)
		verdict, ok := signers[public]
		if !ok || public == "" || keys.Authority() {
			verdict.id, verdict.err = keys.Verify(subject, batch, h)
			signers[public] = verdict
		}
		if verdict.err != nil {
			return protocol.Message{}, verdict.err
		}
		signer = verdict.id
	}
	msg, err := protocol.Decode(data)
	if err == nil && keys != nil {
		err = signing.CheckSigner(signer, msg.From)
	}
	return msg, err
}

// Connection checks, with keys, that the client authenticated as the
// member: as the member's nkey user, whose name is its key; with member
// credentials, as the user the NATS server's credential check
// (internal/natsauth) names a member it admitted, protocol.MemberUser
// with the key its last verified message's credential binds. The
// connection name is the client's choice; the user is not. The NATS
// server must know the members' keys as users (internal/natsconf's member
// users) or check their credentials; where it does neither, no connection
// event counts.
func (v keysVerifier) Connection(cluster string, id uint64, user string) error {
	keys, err := clusterKeys(v.keys, cluster)
	if err != nil || keys == nil {
		return err
	}
	public, ok := keys.PublicKey(id)
	if ok && keys.Authority() {
		public = protocol.MemberUser(cluster, id, public)
	}
	if !ok || user != public {
		return &protocol.ValidationError{Reason: protocol.ReasonSignature, Detail: fmt.Sprintf("a connection named after member %d authenticated as %q, not as its key", id, clip(user))}
	}
	return nil
}

// checkMemberMessage checks what a member's message of cluster, read from
// subject, says for the membership: a broadcast on its own subject, valid
// for a dynamic membership.
func checkMemberMessage(cluster, subject string, msg protocol.Message) error {
	if err := protocol.CheckRoute(cluster, subject, msg); err != nil {
		return err
	}
	return protocol.ValidateFor(msg, protocol.DynamicMember)
}

// memberExpiry is the timer of the next member's silence. The owner
// goroutine owns it: arm sets it for due unless it is set for earlier
// already; refreshes only put silences later, so it may fire early, and
// is armed again for the next.
type memberExpiry struct {
	timer *time.Timer
	// due is when the timer fires; zero while it is stopped.
	due time.Time
}

func newMemberExpiry() *memberExpiry {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &memberExpiry{timer: t}
}

// arm sets the timer for due (zero: nothing to wait for), seen at now.
func (e *memberExpiry) arm(due, now time.Time) {
	if e == nil || due.IsZero() || !e.due.IsZero() && !due.Before(e.due) {
		return
	}
	e.due = due
	e.timer.Reset(max(0, due.Sub(now)))
}

// fired notes that the timer fired.
func (e *memberExpiry) fired() { e.due = time.Time{} }

// listening is since when the observer has listened on NATS without a
// break; zero while it is disconnected.
func (o *Observer) listening() time.Time {
	if since := o.connectedAt.Load(); since != 0 {
		return time.Unix(0, since)
	}
	return time.Time{}
}

// presence handles a presence broadcast: its member joins, or is
// refreshed.
func (o *Observer) presence(cluster string, m liveMsg) {
	msg, err := o.readMessage(cluster, m)
	if err == nil {
		err = checkMemberMessage(cluster, m.subject, msg)
	}
	if err == nil && msg.Type == protocol.TypeBzHello && !memberHello(msg) {
		return // a member that asks to join: not a member yet
	}
	if err == nil && msg.Type != protocol.TypePresence && !memberHello(msg) {
		err = fmt.Errorf("%s message on %s", msg.Type, m.subject)
	}
	if err != nil {
		o.metrics.live.WithLabelValues(protocol.KindPresence, invalid(err)).Inc()
		o.log.Debug("dropping invalid presence", "subject", m.subject, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(protocol.KindPresence, "ok").Inc()
	o.membersMu.Lock()
	before := o.members.Present(cluster)
	ch, joined, err := o.members.Presence(cluster, msg.From, m.at)
	after := o.members.Present(cluster)
	o.membersMu.Unlock()
	switch {
	case errors.Is(err, membership.ErrTooManyMembers):
		o.metrics.membersRefused.WithLabelValues(refusedMembers).Inc()
		o.log.Debug("refusing a member: the cluster has as many as the observer follows", "cluster", cluster, "member", msg.From, "max", membership.MaxMembers)
	case errors.Is(err, membership.ErrTooManyClusters):
		o.metrics.membersRefused.WithLabelValues(refusedClusters).Inc()
		o.log.Debug("refusing a member: as many clusters have members as the observer follows", "cluster", cluster, "member", msg.From, "max", membership.MaxClusters)
	case joined:
		o.expiry.arm(m.at.Add(o.cfg.MemberTimeout), o.now())
		o.recordMembers(cluster, []membership.Change{ch})
	case before != after:
		// A member present before a restart, heard again.
		o.membersShown(cluster)
	}
}

// memberMessage refreshes the sender of a broadcast already read (signed
// by its sender, with keys), or makes it leave for a resign. A message
// not valid for a dynamic membership changes nothing: it may be one of a
// static cluster, which the caller checks otherwise.
func (o *Observer) memberMessage(cluster, subject string, msg protocol.Message, at time.Time) {
	if checkMemberMessage(cluster, subject, msg) != nil {
		return
	}
	var changes []membership.Change
	o.membersMu.Lock()
	before := o.members.Present(cluster)
	if msg.Type == protocol.TypeResign && !o.changingSet(cluster) {
		// A byzantine leader resigns a term to hand it over, and stays:
		// there a member leaves with its connection, or its silence.
		if ch, left := o.members.Resigned(cluster, msg.From, at); left {
			changes = append(changes, ch)
		}
	} else {
		o.members.Heard(cluster, msg.From, at)
	}
	after := o.members.Present(cluster)
	o.membersMu.Unlock()
	switch {
	case len(changes) > 0:
		o.recordMembers(cluster, changes)
	case before != after:
		o.membersShown(cluster)
	}
}

// follows reports whether cluster has members the observer follows.
func (o *Observer) follows(cluster string) bool {
	o.membersMu.RLock()
	defer o.membersMu.RUnlock()
	return o.members.Follows(cluster)
}

// memberBroadcast handles a broadcast of one of memberKinds, which only
// refresh a member; a byzantine member's Hello that is its presence
// (memberHello) is read as a presence.
func (o *Observer) memberBroadcast(cluster, kind string, m liveMsg) {
	if kind == string(protocol.TypeBzHello) && o.changingSet(cluster) {
		o.presence(cluster, m)
		return
	}
	if !o.follows(cluster) {
		return
	}
	msg, err := o.readMessage(cluster, m)
	if err == nil {
		err = checkMemberMessage(cluster, m.subject, msg)
	}
	if err != nil {
		o.metrics.live.WithLabelValues(kind, invalid(err)).Inc()
		o.log.Debug("dropping invalid message", "subject", m.subject, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(kind, "ok").Inc()
	o.memberMessage(cluster, m.subject, msg, m.at)
}

// connEvent is the part of a NATS server's connect or disconnect event
// that the observer reads.
type connEvent struct {
	Client struct {
		// Start is when the connection was opened.
		Start time.Time `json:"start"`
		// Name is the connection's name: protocol.ConnectionName for a
		// node.
		Name string `json:"name"`
		// User is the user the client authenticated as: its public key,
		// U…, for an nkey user.
		User string `json:"user"`
	} `json:"client"`
}

// connection handles a connection event of the NATS server: a member's
// connection closed makes it leave, unless the server reported a newer
// connection of it opened. Events about other clients, or members of
// clusters without members now, are ignored.
func (o *Observer) connection(m liveMsg) {
	var e connEvent
	if err := json.Unmarshal(m.data, &e); err != nil {
		o.log.Debug("undecodable connection event", "subject", m.subject, "err", err)
		return
	}
	cluster, id, ok := protocol.ParseConnectionName(e.Client.Name)
	if !ok || !protocol.DynamicMember(id) || !o.follows(cluster) {
		return
	}
	if err := o.verify.Connection(cluster, id, e.Client.User); err != nil {
		o.metrics.live.WithLabelValues(kindConnection, invalid(err)).Inc()
		o.log.Debug("dropping a connection event", "subject", m.subject, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(kindConnection, "ok").Inc()
	var changes []membership.Change
	o.membersMu.Lock()
	if strings.HasSuffix(m.subject, ".CONNECT") {
		o.members.Connected(cluster, id, e.Client.Start)
	} else if ch, left := o.members.Disconnected(cluster, id, e.Client.Start, m.at); left {
		changes = append(changes, ch)
	}
	o.membersMu.Unlock()
	o.recordMembers(cluster, changes)
}

// expireMembers makes the members not heard for OBSERVER_MEMBER_TIMEOUT
// leave, at now, and arms the timer for the next.
func (o *Observer) expireMembers(now time.Time) {
	o.expiry.fired()
	listening := o.listening()
	o.membersMu.Lock()
	expired := o.members.Expire(now, listening)
	next := o.members.Next(now, listening)
	o.membersMu.Unlock()
	for _, e := range expired {
		o.recordMembers(e.Cluster, e.Changes)
	}
	o.expiry.arm(next, now)
}

// recordMembers writes the joins and leaves of cluster to its history,
// counts and logs them, and updates the page. A write that fails is
// logged: the members present are as changed all the same.
func (o *Observer) recordMembers(cluster string, changes []membership.Change) {
	if len(changes) == 0 {
		return
	}
	recs := make([]history.Record, 0, len(changes))
	o.metrics.membership(cluster)
	for _, ch := range changes {
		recs = append(recs, history.Record{Kind: history.KindMember, Member: ch.Member, Event: history.MemberEventKind(ch.Event),
			Reason: string(ch.Reason), At: protocol.Timestamp{Time: ch.At}})
		o.metrics.memberChanges.WithLabelValues(cluster, string(ch.Event), string(ch.Reason)).Inc()
		o.log.Info("member "+string(ch.Event), "cluster", cluster, "member", ch.Member, "reason", ch.Reason)
	}
	kept, err := o.apply(cluster, recs...)
	if err != nil {
		o.log.Error("cannot record members joining or leaving", "cluster", cluster, "err", err)
	}
	o.changed(cluster, kept)
	o.membersShown(cluster)
}

// membersShown updates the gauge of cluster's members and the page after
// the members present changed.
func (o *Observer) membersShown(cluster string) {
	o.membersMu.RLock()
	n := o.members.Present(cluster)
	o.membersMu.RUnlock()
	o.metrics.known(cluster)
	o.metrics.membership(cluster)
	o.metrics.members.WithLabelValues(cluster).Set(float64(n))
	o.hub.notify(cluster)
}

// restoreMembers brings back, from the history, the members of each
// cluster whose last recorded event is their join: they were present when
// the observer stopped. They leave silent unless heard within
// OBSERVER_MEMBER_TIMEOUT of listening.
func (o *Observer) restoreMembers() {
	for _, name := range o.store.Clusters() {
		present := map[uint64]time.Time{}
		o.store.Read(name, func(c *history.Cluster) {
			for _, e := range c.Membership {
				if e.Event == history.MemberJoined {
					present[e.Member] = e.At
				} else {
					delete(present, e.Member)
				}
			}
		})
		o.membersMu.Lock()
		for _, id := range slices.Sorted(maps.Keys(present)) {
			if err := o.members.Restore(name, id, present[id]); err != nil {
				o.log.Warn("cannot bring back a member present when the observer stopped", "cluster", name, "member", id, "err", err)
			}
		}
		o.membersMu.Unlock()
	}
}

// memberJSON is a member present now, as GET …/members renders it.
type memberJSON struct {
	ID       uint64             `json:"id"`
	Since    protocol.Timestamp `json:"since"`
	LastSeen protocol.Timestamp `json:"last_seen"`
}

// memberEventJSON is a join or leave, as GET …/membership renders it.
type memberEventJSON struct {
	Member uint64                  `json:"member"`
	Event  history.MemberEventKind `json:"event"`
	Reason string                  `json:"reason"`
	At     protocol.Timestamp      `json:"at"`
	Seq    uint64                  `json:"seq"`
}

// apiMembers lists the members of the cluster present now, by ID: []
// for a cluster known without members (a static one), 404 for one the
// observer never saw.
func (o *Observer) apiMembers(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	name := r.PathValue("cluster")
	if !validClusterName(w, name) {
		return
	}
	o.membersMu.RLock()
	members, follows := o.members.Members(name), o.members.Follows(name)
	o.membersMu.RUnlock()
	if !follows && !o.store.Read(name, func(*history.Cluster) {}) {
		writeError(w, http.StatusNotFound, "unknown cluster %q", name)
		return
	}
	out := make([]memberJSON, 0, len(members))
	for _, m := range members {
		out = append(out, memberJSON{ID: m.ID, Since: protocol.Timestamp{Time: m.Since}, LastSeen: protocol.Timestamp{Time: m.LastSeen}})
	}
	writeJSON(w, http.StatusOK, out)
}

// memberEvents is c's member events as a list, placed by their seq.
func memberEvents(c *history.Cluster) list {
	return list{
		n:    len(c.Membership),
		term: func(k int) uint64 { return c.Membership[k].Seq },
		item: func(k int) (time.Time, time.Time, bool) {
			at := c.Membership[k].At
			return at, at, true
		},
	}
}

// apiMembership lists the cluster's joins and leaves, oldest first, with
// the paging of the other lists placed by seq (after_seq, before_seq)
// instead of term.
func (o *Observer) apiMembership(w http.ResponseWriter, r *http.Request) {
	hq, ok := listQuery(w, r, seqPlace)
	if !ok {
		return
	}
	var out []memberEventJSON
	var link string
	if _, ok := o.readCluster(w, r, func(c *history.Cluster) {
		var at []int
		at, link = page(r, hq, time.Time{}, memberEvents(c))
		out = make([]memberEventJSON, 0, len(at))
		for _, k := range at {
			e := c.Membership[k]
			out = append(out, memberEventJSON{Member: e.Member, Event: e.Event, Reason: e.Reason, At: protocol.Timestamp{Time: e.At}, Seq: e.Seq})
		}
	}); !ok {
		return
	}
	writePage(w, out, link)
}

// memberView is a member present now, as the page shows it.
type memberView struct {
	ID     uint64
	Leader bool
	Since  time.Time
}

// addMembers adds to v, the page's view of a cluster whose history is c,
// what it shows of the members: members, those present now, the leader
// marked, and the last joins and leaves, newest first. A cluster that
// never had members shows none of it.
func addMembers(v *clusterView, c *history.Cluster, members []membership.Member) {
	for i := len(c.Membership) - 1; i >= max(0, len(c.Membership)-pageMemberEvents); i-- {
		v.MemberEvents = append(v.MemberEvents, c.Membership[i])
	}
	for _, m := range members {
		v.Members = append(v.Members, memberView{ID: m.ID, Since: m.Since, Leader: v.Current != nil && v.Current.Leader == m.ID})
	}
	v.Dynamic = len(v.Members) > 0 || len(c.Membership) > 0
}

// memberHello reports whether msg is the presence of a member of a
// byzantine cluster with dynamic membership: its Hello, which it says
// each presence interval. One that asks to join (with a key and a
// credential) is not a member yet.
func memberHello(msg protocol.Message) bool {
	return msg.Type == protocol.TypeBzHello && msg.Key == ""
}

// changingSet reports whether cluster is byzantine with dynamic
// membership: its keys follow a member set.
func (o *Observer) changingSet(cluster string) bool {
	keys, err := o.keysOf(cluster)
	return err == nil && keys.MemberSets() != nil
}
