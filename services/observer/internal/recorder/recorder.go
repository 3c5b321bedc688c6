// Package recorder holds the observer's rules: what a leadership
// announcement, a heartbeat, a resign or the passing of time mean for the
// history of a cluster. It decides when a leadership starts and how it
// ends (superseded, resign, silent, unobserved), which leaderless gaps
// are known, and when two nodes act as leader at once (split brain).
//
// A Recorder is a pure state machine, as the election algorithms are: it
// does no I/O, starts no goroutines and never reads a clock; time is
// passed in. It is fed by one goroutine, the observer's owner loop, which
// decodes and checks messages first (signatures included), and it returns
// the history records to write. The caller writes them to the history
// (which drops duplicates by its (cluster, term) rule) before the next
// call: the Recorder reads the recorded state back through History.
//
// # The rules
//
//   - A leadership starts at the `at` of its announcement. When a higher
//     term is announced while the latest leadership lasts, that one ends:
//     "superseded" at the new start if its leader was heard within Grace
//     before the announcement was handled (its last heartbeats were in
//     flight); "silent" at its last heartbeat if it was heard, but longer
//     ago; "unobserved" at the new start if the observer never heard it.
//   - A resign of the current leader ends its leadership, "resign", at the
//     resign's arrival.
//   - A leader not heard from for longer than Window, while the observer
//     listened, ends "silent" at its last heartbeat, or "unobserved" when
//     its heartbeats were never heard (at the start of listening). In a
//     deployment with several elections per process, the beats of the
//     leader's process count as its heartbeats (beats.go).
//   - A leader whose leadership ended silent or unobserved and that is
//     heard again with the same term resumes it.
//   - Split brain: two nodes acting as leader with the same term, or a
//     leader that keeps acting for longer than Grace after a node with a
//     higher term acted (see tracker). Each pair is reported once.
//   - A term heard in heartbeats that the history does not hold after
//     AskAfter is missing: Missing names its cluster once, so that the
//     caller asks the leader for its announcement and passes the answer
//     to Answered.
//
// An end for silence or for a successor is never earlier than the start
// of its leadership. Starts come from the leaders' clocks and the other
// times from the caller's, so a resign may be stamped before the start it
// ends; the history clamps the gaps that follow at zero. The Recorder
// trusts its inputs: they are the caller's checked messages, stamped by
// the caller with their arrival time. It ignores all the same a term
// heard live outside the protocol's bounds (0, above protocol.MaxTerm),
// and what it keeps of the nodes heard live is bounded per cluster,
// whoever sends (see tracker).
package recorder

import (
	"slices"
	"strings"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// Config holds the timing of the rules.
type Config struct {
	// Window is the failure-detection window (OBSERVER_LEADER_TIMEOUT): a
	// leader not heard from for this long has gone, and two nodes heard
	// as leader within it act at the same time.
	Window time.Duration
	// Grace (OBSERVER_SPLIT_GRACE) is how long a superseded leader may
	// still be heard before it counts as split brain, and how long a
	// leader may have been silent when its successor is announced and
	// still count as superseded rather than silent. Below Window.
	Grace time.Duration
	// AskAfter is how long a term heard in heartbeats may stay unrecorded
	// before Missing names its cluster: long enough for the stream to
	// deliver its backlog first, so that leaderships are recorded in
	// order.
	AskAfter time.Duration
}

// History is the recorded state that the rules read: the observer's
// history store, or a map of clusters in tests. The records that a
// Recorder returns must be applied to it before the Recorder is called
// again.
type History interface {
	// Latest returns the leadership of cluster with the highest term.
	Latest(cluster string) (history.Leadership, bool)
	// Each calls f with the history of every cluster, in any order; f
	// reads it and does not call the History.
	Each(f func(name string, c *history.Cluster))
}

// Write is a batch of records for one cluster's history.
type Write struct {
	Cluster string
	Records []history.Record
}

// Recorder applies the rules. It is not safe for concurrent use: one
// goroutine owns it.
type Recorder struct {
	cfg     Config
	history History
	live    *tracker
	// missing holds, per cluster, a term heard in heartbeats that the
	// history does not hold.
	missing map[string]missingTerm
	// beats: when each member of a deployment last beat, and the
	// deployment of each cluster (beats.go).
	beats map[beatKey]time.Time
	via   map[string]string
}

// missingTerm is a leadership heard of but not recorded.
type missingTerm struct {
	term  uint64
	since time.Time // first heard
	asked bool
}

// New returns a Recorder with cfg that reads the recorded state from h.
func New(cfg Config, h History) *Recorder {
	return &Recorder{cfg: cfg, history: h, live: newTracker(cfg.Window, cfg.Grace), missing: map[string]missingTerm{},
		beats: map[beatKey]time.Time{}, via: map[string]string{}}
}

// Announced returns the records of a leadership announced on the stream,
// handled at now: the end of the latest leadership if it lasts and has a
// lower term, then the leadership itself. The history drops the latter if
// it already holds the term.
func (r *Recorder) Announced(cluster string, a protocol.Announcement, now time.Time) []history.Record {
	var recs []history.Record
	if prev, ok := r.history.Latest(cluster); ok && !prev.Ended() && prev.Term < a.Term {
		recs = append(recs, r.endBefore(cluster, prev, a.At.Time, now))
	}
	return append(recs, history.Record{Kind: history.KindLeader, Term: a.Term, Leader: a.Leader, Algorithm: a.Algorithm, At: a.At})
}

// Answered returns the records of a leader's answer to the observer's
// query, handled at now: as Announced, or none if the history already
// holds that term or a newer one (the stream delivered it meanwhile).
func (r *Recorder) Answered(cluster string, a protocol.Announcement, now time.Time) []history.Record {
	if l, ok := r.history.Latest(cluster); ok && l.Term >= a.Term {
		return nil
	}
	return r.Announced(cluster, a, now)
}

// endBefore decides how prev ended, now that a leadership starting at
// next is announced.
func (r *Recorder) endBefore(cluster string, prev history.Leadership, next, now time.Time) history.Record {
	end := history.Record{Kind: history.KindEnd, Term: prev.Term}
	last, seen := r.live.lastSeen(cluster, prev.Leader, prev.Term)
	switch {
	// Heard within the grace (its heartbeats in flight): it was working
	// when its successor took over. Silent for longer, though still
	// within the window, it had stopped at its last message: the
	// successor's election is what filled the gap.
	case r.live.alive(cluster, prev.Leader, prev.Term, now) && now.Sub(last) <= r.cfg.Grace:
		end.At, end.Reason = protocol.Timestamp{Time: next}, string(history.EndSuperseded)
	case seen:
		end.At, end.Reason = protocol.Timestamp{Time: last}, string(history.EndSilent)
	default:
		end.At, end.Reason = protocol.Timestamp{Time: next}, string(history.EndUnobserved)
	}
	if end.At.Before(prev.StartedAt) {
		end.At.Time = prev.StartedAt
	}
	return end
}

// HeardAnnouncement returns the records revealed by node announcing
// itself leader of cluster with term, heard live at at: split brains, or
// the resumption of its leadership.
func (r *Recorder) HeardAnnouncement(cluster string, node, term uint64, at time.Time) []history.Record {
	return r.acted(cluster, node, term, at)
}

// HeardHeartbeat returns the records revealed by a heartbeat (or a Paxos
// leader's lease renewal) of node with term, heard at at, as
// HeardAnnouncement. A term the history does not hold yet becomes
// missing.
func (r *Recorder) HeardHeartbeat(cluster string, node, term uint64, at time.Time) []history.Record {
	if !validTerm(term) {
		return nil
	}
	recs := r.acted(cluster, node, term, at)
	if l, ok := r.history.Latest(cluster); (!ok || l.Term < term) && r.missing[cluster].term < term {
		r.missing[cluster] = missingTerm{term: term, since: at}
	}
	return recs
}

// acted feeds the tracker and returns the split brains and the
// resumption it reveals.
func (r *Recorder) acted(cluster string, node, term uint64, at time.Time) []history.Record {
	if !validTerm(term) {
		return nil
	}
	var recs []history.Record
	for _, s := range r.live.act(cluster, node, term, at) {
		recs = append(recs, history.Record{Kind: history.KindSplit, At: protocol.Timestamp{Time: s.At}, Reason: s.Reason, Leaders: s.Leaders[:]})
	}
	if l, ok := r.history.Latest(cluster); ok && l.Ended() && l.Leader == node && l.Term == term {
		recs = append(recs, history.Record{Kind: history.KindResume, Term: term, At: protocol.Timestamp{Time: at}})
	}
	return recs
}

// validTerm reports whether term is within the protocol's bounds: a
// term outside them is no sign of a leader.
func validTerm(term uint64) bool { return term != 0 && term <= protocol.MaxTerm }

// Resigned returns the records of node's resign from cluster, heard at
// at: the end of its leadership if it is the current one.
func (r *Recorder) Resigned(cluster string, node uint64, at time.Time) []history.Record {
	r.live.resign(cluster, node)
	if cur, ok := r.history.Latest(cluster); ok && !cur.Ended() && cur.Leader == node {
		return []history.Record{{Kind: history.KindEnd, Term: cur.Term, At: protocol.Timestamp{Time: at}, Reason: string(history.EndResign)}}
	}
	return nil
}

// Silence returns, at now, the end of every current leadership whose
// leader has not been heard from for longer than Window while the
// observer listened, which it has done since listening (zero: it is not
// connected, and cannot tell silence from its own disconnection). Such a
// leadership ends silent at its leader's last heartbeat, or unobserved at
// listening if the observer never heard it. The writes come in the order
// of the clusters' names.
func (r *Recorder) Silence(now, listening time.Time) []Write {
	if listening.IsZero() {
		return nil
	}
	// One pass over every cluster: with thousands, it runs each half
	// window, so it neither copies nor sorts their names; only the
	// writes, usually none, are sorted.
	var writes []Write
	r.history.Each(func(cluster string, c *history.Cluster) {
		l, ok := c.Latest()
		if !ok || l.Ended() {
			return
		}
		last, seen := r.live.lastSeen(cluster, l.Leader, l.Term)
		if beat := r.beatOf(cluster, l.Leader); beat.After(last) {
			last, seen = beat, true // its process beats
		}
		heard := listening
		if last.After(heard) {
			heard = last
		}
		if now.Sub(heard) <= r.cfg.Window {
			return
		}
		end := history.Record{Kind: history.KindEnd, Term: l.Term, At: protocol.Timestamp{Time: last}, Reason: string(history.EndSilent)}
		if !seen {
			end.At, end.Reason = protocol.Timestamp{Time: listening}, string(history.EndUnobserved)
		}
		if end.At.Before(l.StartedAt) {
			end.At.Time = l.StartedAt
		}
		writes = append(writes, Write{Cluster: cluster, Records: []history.Record{end}})
	})
	slices.SortFunc(writes, func(a, b Write) int { return strings.Compare(a.Cluster, b.Cluster) })
	return writes
}

// Missing returns, at now, the clusters whose leader the caller must ask
// for its announcement: a term heard in heartbeats has been missing from
// the history for AskAfter. Each missing term is named once; the names
// are sorted.
func (r *Recorder) Missing(now time.Time) []string {
	var ask []string
	for cluster, m := range r.missing {
		if l, ok := r.history.Latest(cluster); ok && l.Term >= m.term {
			delete(r.missing, cluster)
			continue
		}
		if !m.asked && now.Sub(m.since) >= r.cfg.AskAfter {
			m.asked = true
			r.missing[cluster] = m
			ask = append(ask, cluster)
		}
	}
	slices.Sort(ask)
	return ask
}
