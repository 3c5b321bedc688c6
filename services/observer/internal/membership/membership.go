// Package membership follows, per cluster with dynamic membership, which
// members are present as the observer sees them: who joined, who left and
// why.
//
// A Tracker is a pure state machine, as the observer's recorder is: it
// does no I/O, starts no goroutines and never reads a clock; the caller
// passes the time in, checks every message first (signatures included)
// and owns the Tracker from one goroutine, or guards it with a lock.
//
// # The rules
//
//   - A member joins with its first presence broadcast (reason
//     "presence"). Nothing else makes a member: the other broadcasts of a
//     cluster with a static membership never do.
//   - Any broadcast of a member that is present (presence, heartbeat,
//     election, …) refreshes it: it was last seen then.
//   - A member leaves when it resigns ("resign"), when the NATS server
//     reports its connection closed ("disconnected"; a close of a
//     connection older than the newest one the server reported opened is
//     not one), or when it has not been heard for the time-out while the
//     caller listened ("silent").
//   - A leave is at the time the caller learnt it: for silence, when the
//     time-out ran out, so that a member is listed as present exactly
//     until it left.
//   - Silence counts only while the caller listens: Expire and Next take
//     the time since when it has (zero: it is not connected, and cannot
//     tell a member's silence from its own disconnection), and a member
//     heard before that has the whole time-out from then.
//   - Restore brings back, after the observer restarted, a member whose
//     last recorded event is its join: it keeps its Since, is not listed
//     until it is heard again, and leaves silent if it is not heard within
//     the time-out of listening, so the joins and leaves recorded
//     alternate for each member.
//
// # Bounds
//
// What a Tracker holds is bounded whoever sends: at most MaxMembers per
// cluster and MaxClusters clusters with members (a cluster whose members
// all left is forgotten). A join beyond either bound is refused with
// ErrTooManyMembers or ErrTooManyClusters, for the caller to count; the
// members already present are never pushed out by newcomers.
package membership

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"time"
)

// MaxMembers bounds the members followed per cluster.
const MaxMembers = 1024

// MaxClusters bounds the clusters with members followed at once.
const MaxClusters = 1024

// ErrTooManyMembers refuses the join of a member to a cluster that has
// MaxMembers already.
var ErrTooManyMembers = errors.New("membership: the cluster has as many members as the observer follows")

// ErrTooManyClusters refuses the first member of a cluster while
// MaxClusters clusters have members.
var ErrTooManyClusters = errors.New("membership: as many clusters have members as the observer follows")

// Event says whether a member joined or left.
type Event string

// The events.
const (
	Joined Event = "joined"
	Left   Event = "left"
)

// Reason says how the observer learnt that a member joined or left.
type Reason string

// The reasons.
const (
	// ReasonPresence: the member's first presence broadcast (a join).
	ReasonPresence Reason = "presence"
	// ReasonResign: the member resigned, leaving cleanly.
	ReasonResign Reason = "resign"
	// ReasonDisconnected: the NATS server reported its connection closed.
	ReasonDisconnected Reason = "disconnected"
	// ReasonSilent: the member was not heard for the time-out.
	ReasonSilent Reason = "silent"
)

// Change is a member that joined or left.
type Change struct {
	Member uint64
	Event  Event
	Reason Reason
	At     time.Time
}

// Member is a member present now.
type Member struct {
	ID uint64
	// Since is when it joined; LastSeen when it was last heard.
	Since, LastSeen time.Time
}

// Expired are the members of one cluster that fell silent.
type Expired struct {
	Cluster string
	Changes []Change
}

type member struct {
	since, last time.Time
	// conn is the start of the member's newest connection the server
	// reported opened; zero if none.
	conn time.Time
	// restored is set for a member brought back by Restore and not heard
	// since: last is zero, and it is not listed.
	restored bool
}

type cluster struct {
	members map[uint64]*member
	// restored counts the members with restored set.
	restored int
}

// Tracker follows the members of every cluster. The zero value is not
// usable: use New.
type Tracker struct {
	timeout  time.Duration
	clusters map[string]*cluster
}

// New returns a Tracker whose members leave silent after timeout.
func New(timeout time.Duration) *Tracker {
	return &Tracker{timeout: timeout, clusters: map[string]*cluster{}}
}

// Timeout is the silence after which a member leaves.
func (t *Tracker) Timeout() time.Duration { return t.timeout }

func (t *Tracker) member(name string, id uint64) (*cluster, *member) {
	c := t.clusters[name]
	if c == nil {
		return nil, nil
	}
	return c, c.members[id]
}

// add makes id a member of cluster name, within the bounds.
func (t *Tracker) add(name string, id uint64, m *member) error {
	c := t.clusters[name]
	if c == nil {
		if len(t.clusters) >= MaxClusters {
			return ErrTooManyClusters
		}
		c = &cluster{members: map[uint64]*member{}}
		t.clusters[name] = c
	}
	if len(c.members) >= MaxMembers {
		return ErrTooManyMembers
	}
	c.members[id] = m
	if m.restored {
		c.restored++
	}
	return nil
}

// remove drops id from cluster name, and the cluster once it has no
// member left.
func (t *Tracker) remove(name string, id uint64) {
	c := t.clusters[name]
	if m := c.members[id]; m != nil && m.restored {
		c.restored--
	}
	delete(c.members, id)
	if len(c.members) == 0 {
		delete(t.clusters, name)
	}
}

// heard refreshes m at now.
func (c *cluster) heard(m *member, now time.Time) {
	if m.restored {
		m.restored = false
		c.restored--
	}
	if now.After(m.last) {
		m.last = now
	}
}

// Presence handles a presence broadcast of member id of cluster, heard at
// now: the member joins if it was not present (joined true), or it is
// refreshed. A join beyond the bounds is refused with ErrTooManyMembers
// or ErrTooManyClusters.
func (t *Tracker) Presence(cluster string, id uint64, now time.Time) (ch Change, joined bool, err error) {
	if c, m := t.member(cluster, id); m != nil {
		c.heard(m, now)
		return Change{}, false, nil
	}
	if err := t.add(cluster, id, &member{since: now, last: now}); err != nil {
		return Change{}, false, err
	}
	return Change{Member: id, Event: Joined, Reason: ReasonPresence, At: now}, true, nil
}

// Heard handles any other broadcast of member id of cluster, heard at
// now: a present member is refreshed. It reports whether id is a member.
func (t *Tracker) Heard(cluster string, id uint64, now time.Time) bool {
	c, m := t.member(cluster, id)
	if m == nil {
		return false
	}
	c.heard(m, now)
	return true
}

// Resigned handles the resign of member id of cluster, heard at now: a
// member leaves (left true).
func (t *Tracker) Resigned(cluster string, id uint64, now time.Time) (ch Change, left bool) {
	if _, m := t.member(cluster, id); m == nil {
		return Change{}, false
	}
	t.remove(cluster, id)
	return Change{Member: id, Event: Left, Reason: ReasonResign, At: now}, true
}

// Connected notes that the server reported a connection of member id of
// cluster opened, started at start: the close of an older one, reported
// late, is then no leave.
func (t *Tracker) Connected(cluster string, id uint64, start time.Time) {
	if _, m := t.member(cluster, id); m != nil && start.After(m.conn) {
		m.conn = start
	}
}

// Disconnected handles the server's report, at now, that the connection
// of member id of cluster started at start closed: the member leaves
// (left true) unless a newer connection of it was reported opened.
func (t *Tracker) Disconnected(cluster string, id uint64, start, now time.Time) (ch Change, left bool) {
	_, m := t.member(cluster, id)
	if m == nil || m.conn.After(start) {
		return Change{}, false
	}
	t.remove(cluster, id)
	return Change{Member: id, Event: Left, Reason: ReasonDisconnected, At: now}, true
}

// Restore brings back member id of cluster, which joined at since and
// had not left when the observer stopped. It is refused beyond the
// bounds, and is a no-op for a member present already.
func (t *Tracker) Restore(cluster string, id uint64, since time.Time) error {
	if _, m := t.member(cluster, id); m != nil {
		return nil
	}
	return t.add(cluster, id, &member{since: since, restored: true})
}

// due is when m falls silent, listening since listening (not zero).
func (t *Tracker) due(m *member, listening time.Time) time.Time {
	from := m.last
	if listening.After(from) {
		from = listening
	}
	return from.Add(t.timeout)
}

// Expire removes, at now, the members not heard for the time-out while
// the caller listened, which it has done since listening (zero: it does
// not, and nobody falls silent). The leaves are at now, by cluster name
// and member ID.
func (t *Tracker) Expire(now, listening time.Time) []Expired {
	if listening.IsZero() {
		return nil
	}
	var out []Expired
	for _, name := range slices.Sorted(maps.Keys(t.clusters)) {
		c := t.clusters[name]
		var changes []Change
		for id, m := range c.members {
			if !now.Before(t.due(m, listening)) {
				changes = append(changes, Change{Member: id, Event: Left, Reason: ReasonSilent, At: now})
			}
		}
		if len(changes) == 0 {
			continue
		}
		slices.SortFunc(changes, func(a, b Change) int { return cmp.Compare(a.Member, b.Member) })
		for _, ch := range changes {
			t.remove(name, ch.Member)
		}
		out = append(out, Expired{Cluster: name, Changes: changes})
	}
	return out
}

// Next returns when the next member falls silent if nothing is heard
// meanwhile, listening since listening: zero if no cluster has members.
// While the caller does not listen (listening zero), it is one time-out
// from now, for the caller to look again.
func (t *Tracker) Next(now, listening time.Time) time.Time {
	if len(t.clusters) == 0 {
		return time.Time{}
	}
	if listening.IsZero() {
		return now.Add(t.timeout)
	}
	var next time.Time
	for _, c := range t.clusters {
		for _, m := range c.members {
			if due := t.due(m, listening); next.IsZero() || due.Before(next) {
				next = due
			}
		}
	}
	return next
}

// Members returns the members of cluster present now, by ID: not those
// restored and not heard since.
func (t *Tracker) Members(cluster string) []Member {
	c := t.clusters[cluster]
	if c == nil {
		return nil
	}
	out := make([]Member, 0, len(c.members)-c.restored)
	for id, m := range c.members {
		if !m.restored {
			out = append(out, Member{ID: id, Since: m.since, LastSeen: m.last})
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Present returns how many members of cluster Members lists.
func (t *Tracker) Present(cluster string) int {
	c := t.clusters[cluster]
	if c == nil {
		return 0
	}
	return len(c.members) - c.restored
}

// Follows reports whether cluster has members, restored ones included:
// whether its other broadcasts can refresh one.
func (t *Tracker) Follows(cluster string) bool {
	return t.clusters[cluster] != nil
}
