package recorder

import (
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// maxActors bounds the nodes followed per cluster: a cluster has at most
// certify.MaxMembers members, and without member keys anyone may send
// heartbeats in any node's name. One more forgets the node heard from
// least recently.
const maxActors = certify.MaxMembers

// maxReported bounds the pairs remembered as reported per cluster: past
// it, only the pairs of nodes still followed, with the terms they act
// with now, are kept (at most maxActors·(maxActors−1)/2).
const maxReported = maxActors * maxActors / 2

// tracker follows, per cluster, which nodes act as leader right now, from
// what they publish live: announcements and heartbeats count as acting,
// a resign ends it. It detects split brain and tells when a leader was
// last heard from. It is a pure state machine: time is passed in, it does
// no I/O and is owned by one goroutine.
//
// A node counts as acting until window has passed since it last acted, or
// until it resigns. When a node acts with a term lower than another acting
// node's, it has been superseded; it is expected to stop within grace (the
// heartbeat it had in flight when the new leader was announced). Split
// brain is two acting nodes with the same term, or a superseded node that
// still acts after grace.
//
// What it holds per cluster is bounded (maxActors, maxReported), whoever
// sends; the callers check terms against the protocol's bounds first.
type tracker struct {
	window, grace time.Duration
	clusters      map[string]*liveCluster
}

type liveCluster struct {
	actors   map[uint64]*actor
	reported map[[2]history.Acting]bool
}

type actor struct {
	term uint64
	last time.Time
	// superseded is when a node with a higher term was first seen acting
	// at the same time as this one, zero if never.
	superseded time.Time
	resigned   bool
}

func newTracker(window, grace time.Duration) *tracker {
	return &tracker{window: window, grace: grace, clusters: map[string]*liveCluster{}}
}

func (t *tracker) cluster(name string) *liveCluster {
	c := t.clusters[name]
	if c == nil {
		// reported is made at the first split brain: most clusters
		// never have one.
		c = &liveCluster{actors: map[uint64]*actor{}}
		t.clusters[name] = c
	}
	return c
}

// actor returns the node followed in cluster, nil if none: unlike
// cluster, it creates nothing, so that asking about a cluster whose
// nodes were never heard costs no memory.
func (t *tracker) actor(cluster string, node uint64) *actor {
	if c := t.clusters[cluster]; c != nil {
		return c.actors[node]
	}
	return nil
}

func (t *tracker) acting(a *actor, now time.Time) bool {
	return !a.resigned && now.Sub(a.last) <= t.window
}

// act records that node acted as leader of cluster with term at now, and
// returns the split-brain events this reveals (each pair once).
func (t *tracker) act(cluster string, node, term uint64, now time.Time) []history.SplitBrain {
	c := t.cluster(cluster)
	me := c.actors[node]
	if me == nil || me.term != term {
		me = &actor{term: term}
		c.actors[node] = me
	}
	me.last, me.resigned = now, false
	if len(c.actors) > maxActors {
		c.forgetOldest(node)
	}
	if len(c.reported) > maxReported {
		c.pruneReported()
	}

	var events []history.SplitBrain
	others := make([]uint64, 0, len(c.actors))
	for id := range c.actors {
		if id != node {
			others = append(others, id)
		}
	}
	slices.Sort(others)
	for _, id := range others {
		o := c.actors[id]
		if !t.acting(o, now) {
			continue
		}
		reason := ""
		switch {
		case o.term == term:
			reason = history.SplitSameTerm
		case o.term < term:
			if o.superseded.IsZero() {
				o.superseded = now
			}
		default:
			if me.superseded.IsZero() {
				me.superseded = now
			}
			if now.Sub(me.superseded) > t.grace {
				reason = history.SplitStaleLeader
			}
		}
		if reason == "" {
			continue
		}
		pair := [2]history.Acting{{Leader: node, Term: term}, {Leader: id, Term: o.term}}
		if pair[0].Term > pair[1].Term || (pair[0].Term == pair[1].Term && pair[0].Leader > pair[1].Leader) {
			pair[0], pair[1] = pair[1], pair[0]
		}
		if c.reported[pair] {
			continue
		}
		if c.reported == nil {
			c.reported = map[[2]history.Acting]bool{}
		}
		c.reported[pair] = true
		events = append(events, history.SplitBrain{At: now, Reason: reason, Leaders: pair})
	}
	return events
}

// forgetOldest forgets the node heard from least recently, other than
// keep (the lowest ID of those heard at that time, so that it is
// deterministic).
func (c *liveCluster) forgetOldest(keep uint64) {
	var oldest uint64
	for id, a := range c.actors {
		if id == keep {
			continue
		}
		if o := c.actors[oldest]; oldest == 0 || a.last.Before(o.last) || a.last.Equal(o.last) && id < oldest {
			oldest = id
		}
	}
	delete(c.actors, oldest)
}

// pruneReported keeps only the reported pairs of nodes still followed
// with the terms they act with now: a pair forgotten is reported again
// if it ever recurs.
func (c *liveCluster) pruneReported() {
	current := func(a history.Acting) bool {
		o := c.actors[a.Leader]
		return o != nil && o.term == a.Term
	}
	for pair := range c.reported {
		if !current(pair[0]) || !current(pair[1]) {
			delete(c.reported, pair)
		}
	}
}

// resign records that node left cleanly.
func (t *tracker) resign(cluster string, node uint64) {
	if a := t.actor(cluster, node); a != nil {
		a.resigned = true
	}
}

// lastSeen returns when node last acted as leader of cluster with term or
// a newer one: a leader that moved on to a newer term of its own (a Paxos
// leader's higher ballot) was working until then.
func (t *tracker) lastSeen(cluster string, node, term uint64) (time.Time, bool) {
	a := t.actor(cluster, node)
	if a == nil || a.term < term {
		return time.Time{}, false
	}
	return a.last, true
}

// alive reports whether node acts as leader of cluster at now, with term
// or a newer one.
func (t *tracker) alive(cluster string, node, term uint64, now time.Time) bool {
	a := t.actor(cluster, node)
	return a != nil && a.term >= term && t.acting(a, now)
}
