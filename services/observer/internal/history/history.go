// Package history is the observer's record of every leadership of every
// cluster: who led, under which term, from when to when, how it ended, and
// the split-brain events seen on the way.
//
// The record is a set of append-only JSON-lines files, one per cluster,
// under one directory. Each line is a Record; the state of a cluster is the
// fold of its lines in order. Apply writes a batch of records and fsyncs
// the file before it changes the state in memory and returns, so a caller
// that acknowledges its input only after Apply returns never loses it.
//
// Records are idempotent: a leadership is identified by (cluster, term), and
// a Leader record for a term that is already known is dropped, on insert
// and on load, so a redelivered announcement is never recorded twice.
//
// A file holds only whole lines. An append that fails (a full disk, a
// failed fsync) is cut back off the file before Apply returns its error,
// so the next append starts on a line of its own; the history in memory
// is unchanged, and the caller does not acknowledge the input, which
// comes again. A torn last line (the process was killed in the middle of
// a write) is cut off, with a warning, when the file is opened; it had
// not been acknowledged. Any other line that is not a record makes Open
// fail with ErrCorrupt: the history is not silently shortened.
//
// A history may be compacted to its last leaderships (Store.Compact): the
// file is rewritten with a Floor record first, and records of terms below
// the floor are refused from then on, so an old announcement redelivered
// after a compaction is not recorded again.
//
// A cluster also keeps its faulty members: a member of a byzantine
// cluster whose lie was proven (two contradicting statements signed with
// its key, certify.Evidence) is recorded once, with the first proof seen,
// and stays recorded. The caller checks the proof's signatures before it
// records it.
//
// Split brains and faulty members are bounded per cluster, whatever the
// network sends: at most MaxSplitBrains and MaxFaulty. One more drops the
// oldest of its kind, in memory at once and, once the file holds as many
// such dropped lines as MaxSplitBrains, on disk too: the store rewrites
// the file as a compaction does (Store.Apply). The caller counts what
// was dropped.
//
// A cluster with dynamic membership also keeps who joined and left it,
// as the observer saw it: member events (KindMember), numbered in the
// order recorded (Seq, from 1, never reused). They are bounded like the
// split brains: the last MaxMembership are kept, one more drops the
// oldest, and compaction keeps them whatever the leaderships' floor.
// Applying only member records appends them without copying the rest of
// the cluster (Store.Apply).
//
// A leadership is a flap when the leader before it took back office less
// than FlapWindow after it started (Cluster.Flap): leader A, then B, then
// A again within a second of B's start, the mark of a spurious
// suspicion of a live leader. It is derived from the leaderships, never
// recorded: the cluster keeps their count (Cluster.Flaps).
//
// Times come from two clocks: a leadership starts at the `at` of its
// announcement (the new leader's clock); ends that the observer detects
// itself (resign, silence) carry the observer's clock. Gaps are clamped at
// zero, so a small skew cannot make them negative.
package history

import (
	"cmp"
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// MaxFaulty bounds the faulty members recorded per cluster: a cluster
// that can prove lies has at most certify.MaxMembers members. One more
// drops the oldest.
const MaxFaulty = certify.MaxMembers

// MaxSplitBrains bounds the split brains recorded per cluster. One more
// drops the oldest: a liar or a forger that makes them by the thousand
// cannot grow the history.
const MaxSplitBrains = 1000

// MaxMembership bounds the member events (joins and leaves) recorded per
// cluster. One more drops the oldest.
const MaxMembership = 10000

// FlapWindow is how soon a leader change must be reversed for the
// leadership between to be a flap (Cluster.Flap).
const FlapWindow = time.Second

// Kind names what a Record says.
type Kind string

// The kinds of record.
const (
	// KindLeader: a node became leader (an announcement).
	KindLeader Kind = "leader"
	// KindEnd: a leadership ended, at At, for Reason.
	KindEnd Kind = "end"
	// KindResume: a leadership that was ended by silence turned out to be
	// alive (its leader was heard again with the same term).
	KindResume Kind = "resume"
	// KindSplit: two nodes acted as leader at the same time.
	KindSplit Kind = "split"
	// KindFloor: the leaderships below Term were compacted away; records
	// of lower terms are refused.
	KindFloor Kind = "floor"
	// KindFaulty: Member lied, as Evidence proves; At is when the
	// observer recorded it.
	KindFaulty Kind = "faulty"
	// KindMember: Member joined or left the cluster (Event), for Reason,
	// at At; Seq numbers the cluster's member events.
	KindMember Kind = "member"
)

// MemberEventKind says whether a member joined or left (KindMember).
type MemberEventKind string

// The member events.
const (
	MemberJoined MemberEventKind = "joined"
	MemberLeft   MemberEventKind = "left"
)

// EndReason says how the observer learnt that a leadership ended.
type EndReason string

// The reasons a leadership ends.
const (
	// EndSuperseded: the next leader was announced while this one was
	// still heard from; the leadership ends when the next starts.
	EndSuperseded EndReason = "superseded"
	// EndResign: the leader left cleanly; the leadership ends at its
	// resign message.
	EndResign EndReason = "resign"
	// EndSilent: the leader fell silent for longer than the
	// failure-detection window; the leadership ends at the last time the
	// leader was heard from.
	EndSilent EndReason = "silent"
	// EndUnobserved: the observer was not watching when the leadership
	// ended (it was down, or started after the leader died). EndedAt is
	// the earliest time the observer knew the leadership was over, an
	// upper bound; the gap after it is unknown.
	EndUnobserved EndReason = "unobserved"
)

// Acting names a node that acted as leader with a term.
type Acting struct {
	Leader uint64 `json:"leader"`
	Term   uint64 `json:"term"`
}

// Record is one line of a cluster's file.
type Record struct {
	Kind Kind `json:"kind"`
	// Term identifies the leadership (Leader, End, Resume).
	Term uint64 `json:"term,omitempty"`
	// Leader and Algorithm come from the announcement (Leader).
	Leader    uint64             `json:"leader,omitempty"`
	Algorithm protocol.Algorithm `json:"algorithm,omitempty"`
	// At is when the leadership started (Leader), ended (End) or when
	// the split brain was seen (Split).
	At protocol.Timestamp `json:"at"`
	// Reason is why the leadership ended (End) or what the split brain
	// was (Split).
	Reason string `json:"reason,omitempty"`
	// Leaders are the two nodes that acted as leader at once (Split).
	Leaders []Acting `json:"leaders,omitempty"`
	// Member is the member convicted (Faulty), or the one that joined
	// or left (Member).
	Member uint64 `json:"member,omitempty"`
	// Event is whether Member joined or left (Member); Reason says how
	// the observer learnt it.
	Event MemberEventKind `json:"event,omitempty"`
	// Seq numbers a cluster's member events (Member), from 1 in the
	// order recorded. Cluster.Apply sets it on a record that has none.
	Seq uint64 `json:"seq,omitempty"`
	// Evidence is the proof of its lie (Faulty), its signatures checked
	// before it was recorded.
	Evidence *certify.Evidence `json:"evidence,omitempty"`
}

// Faulty is a member proven to have lied.
type Faulty struct {
	Member uint64
	// At is when the observer recorded it.
	At time.Time
	// Evidence is the first proof seen: two contradicting statements
	// signed with the member's key.
	Evidence certify.Evidence
}

// MemberEvent is a member that joined or left a cluster with dynamic
// membership, as the observer saw it.
type MemberEvent struct {
	// Seq numbers the cluster's member events, from 1 in the order
	// recorded.
	Seq    uint64
	Member uint64
	Event  MemberEventKind
	// Reason is presence (a join), resign, disconnected or silent (a
	// leave).
	Reason string
	At     time.Time
}

// Leadership is one leader's time in office.
type Leadership struct {
	Term      uint64
	Leader    uint64
	Algorithm protocol.Algorithm
	StartedAt time.Time
	// EndedAt is zero while the leadership lasts.
	EndedAt   time.Time
	EndReason EndReason
}

// Ended reports whether the leadership is over.
func (l Leadership) Ended() bool { return !l.EndedAt.IsZero() }

// SplitBrain is an event where two different nodes acted as leader at the
// same time.
type SplitBrain struct {
	At time.Time
	// Reason is "same_term" when two nodes claimed one term, and
	// "stale_leader" when a node kept acting as leader after a newer term
	// was announced.
	Reason string
	// Leaders are the two nodes, the lower term first.
	Leaders [2]Acting
}

// Split-brain reasons.
const (
	SplitSameTerm    = "same_term"
	SplitStaleLeader = "stale_leader"
)

// Cluster is the recorded state of one cluster.
type Cluster struct {
	// Leaderships, in increasing term.
	Leaderships []Leadership
	// SplitBrains, in the order seen.
	SplitBrains []SplitBrain
	// Floor is the lowest term still recorded after a compaction: the
	// leaderships below it were dropped. 0 if never compacted.
	Floor uint64
	// Faulty are the members proven to have lied, in the order recorded,
	// one entry per member, at most MaxFaulty; compaction keeps them.
	Faulty []Faulty
	// Membership are the member events, in increasing Seq, at most
	// MaxMembership; compaction keeps them.
	Membership []MemberEvent
	// memberSeq is the Seq of the last member event recorded.
	memberSeq uint64
	// stale counts the lines of the cluster's file that the state no
	// longer holds: split brains, faulty members and member events
	// dropped for the caps.
	stale int
	// flaps counts the flaps among Leaderships (Flaps).
	flaps int
}

// FaultyMember returns the record of member id if it was proven faulty.
func (c *Cluster) FaultyMember(id uint64) (Faulty, bool) {
	for _, f := range c.Faulty {
		if f.Member == id {
			return f, true
		}
	}
	return Faulty{}, false
}

// Latest returns the leadership with the highest term.
func (c *Cluster) Latest() (Leadership, bool) {
	if len(c.Leaderships) == 0 {
		return Leadership{}, false
	}
	return c.Leaderships[len(c.Leaderships)-1], true
}

// Current returns the latest leadership if it has not ended.
func (c *Cluster) Current() (Leadership, bool) {
	l, ok := c.Latest()
	if !ok || l.Ended() {
		return Leadership{}, false
	}
	return l, true
}

func (c *Cluster) find(term uint64) (int, bool) {
	return slices.BinarySearchFunc(c.Leaderships, term, func(l Leadership, t uint64) int { return cmp.Compare(l.Term, t) })
}

// Index returns the index in Leaderships of the leadership of term, and
// whether there is one.
func (c *Cluster) Index(term uint64) (int, bool) {
	return c.find(term)
}

// accepts reports whether r would change the cluster: the dedup rule.
func (c *Cluster) accepts(r Record) bool {
	if r.Kind != KindSplit && r.Kind != KindFaulty && r.Kind != KindMember && r.Term < c.Floor {
		return false // compacted away
	}
	switch r.Kind {
	case KindLeader:
		_, found := c.find(r.Term)
		return r.Term != 0 && r.Leader != 0 && !found
	case KindEnd:
		i, found := c.find(r.Term)
		return found && !c.Leaderships[i].Ended()
	case KindResume:
		i, found := c.find(r.Term)
		if !found {
			return false
		}
		reason := c.Leaderships[i].EndReason
		return reason == EndSilent || reason == EndUnobserved
	case KindSplit:
		return len(r.Leaders) == 2
	case KindFloor:
		return r.Term > c.Floor
	case KindFaulty:
		if r.Member == 0 || r.Evidence == nil || r.Evidence.Member() != r.Member {
			return false
		}
		_, known := c.FaultyMember(r.Member)
		return !known
	case KindMember:
		return r.Member != 0 && (r.Event == MemberJoined || r.Event == MemberLeft) && r.Reason != "" && r.Seq > c.memberSeq
	}
	return false
}

// numbered returns r with its Seq set, if it is a member event without
// one: the next of the cluster.
func (c *Cluster) numbered(r Record) Record {
	if r.Kind == KindMember && r.Seq == 0 {
		r.Seq = c.memberSeq + 1
	}
	return r
}

// Apply folds recs into the cluster in order, drops those that would not
// change it (a leadership already known, an end of one already ended, a
// term below the floor) and returns the records it kept, member events
// numbered. It does no I/O: Store.Apply writes the kept records to disk
// first.
func (c *Cluster) Apply(recs ...Record) []Record {
	var kept []Record
	for _, r := range recs {
		r = c.numbered(r)
		if c.accepts(r) {
			c.apply(r)
			kept = append(kept, r)
		}
	}
	return kept
}

// apply changes the cluster by r, which must be accepted.
func (c *Cluster) apply(r Record) {
	switch r.Kind {
	case KindLeader:
		i, _ := c.find(r.Term)
		l := Leadership{Term: r.Term, Leader: r.Leader, Algorithm: r.Algorithm, StartedAt: r.At.Time}
		if i < len(c.Leaderships) {
			// A lower term announced after a higher one: it was
			// superseded by the next before it was recorded.
			next := c.Leaderships[i]
			l.EndedAt, l.EndReason = next.StartedAt, EndSuperseded
		}
		c.Leaderships = slices.Insert(c.Leaderships, i, l)
		gained, lost := c.flapChange(i)
		c.flaps += len(gained) - lost
	case KindEnd:
		i, _ := c.find(r.Term)
		c.Leaderships[i].EndedAt, c.Leaderships[i].EndReason = r.At.Time, EndReason(r.Reason)
	case KindResume:
		i, _ := c.find(r.Term)
		c.Leaderships[i].EndedAt, c.Leaderships[i].EndReason = time.Time{}, ""
	case KindSplit:
		c.SplitBrains = append(c.SplitBrains, SplitBrain{At: r.At.Time, Reason: r.Reason, Leaders: [2]Acting(r.Leaders)})
		if over := len(c.SplitBrains) - MaxSplitBrains; over > 0 {
			c.SplitBrains = slices.Delete(c.SplitBrains, 0, over)
			c.stale += over
		}
	case KindFaulty:
		c.Faulty = append(c.Faulty, Faulty{Member: r.Member, At: r.At.Time, Evidence: *r.Evidence})
		if over := len(c.Faulty) - MaxFaulty; over > 0 {
			c.Faulty = slices.Delete(c.Faulty, 0, over)
			c.stale += over
		}
	case KindMember:
		c.memberSeq = r.Seq
		c.Membership = append(c.Membership, MemberEvent{Seq: r.Seq, Member: r.Member, Event: r.Event, Reason: r.Reason, At: r.At.Time})
		if over := len(c.Membership) - MaxMembership; over > 0 {
			c.Membership = slices.Delete(c.Membership, 0, over)
			c.stale += over
		}
	case KindFloor:
		c.Floor = r.Term
		i, _ := c.find(r.Term)
		c.Leaderships = slices.Delete(c.Leaderships, 0, i)
		c.flaps = 0
		for j := range c.Leaderships {
			if c.Flap(j) {
				c.flaps++
			}
		}
		c.SplitBrains = slices.DeleteFunc(c.SplitBrains, func(s SplitBrain) bool {
			return max(s.Leaders[0].Term, s.Leaders[1].Term) < r.Term
		})
	}
}

// compacted returns the cluster with only its last keep leaderships (and
// the split brains that involve them; keep 0 keeps every leadership), and
// the records that rebuild it, starting with the Floor record if any. It
// returns nil if there are no more than keep and the file holds no stale
// lines (split brains, faulty members or member events dropped for the
// caps).
func (c *Cluster) compacted(keep int) (*Cluster, []Record) {
	drop := keep > 0 && len(c.Leaderships) > keep
	if !drop && c.stale == 0 {
		return nil, nil
	}
	kept := c.clone()
	kept.stale = 0
	if drop {
		first := c.Leaderships[len(c.Leaderships)-keep]
		kept.apply(Record{Kind: KindFloor, Term: first.Term, At: protocol.Timestamp{Time: first.StartedAt}})
	}
	var recs []Record
	if kept.Floor > 0 {
		floor := Record{Kind: KindFloor, Term: kept.Floor}
		if len(kept.Leaderships) > 0 {
			floor.At = protocol.Timestamp{Time: kept.Leaderships[0].StartedAt}
		}
		recs = append(recs, floor)
	}
	for _, l := range kept.Leaderships {
		recs = append(recs, Record{Kind: KindLeader, Term: l.Term, Leader: l.Leader, Algorithm: l.Algorithm, At: protocol.Timestamp{Time: l.StartedAt}})
		if l.Ended() {
			recs = append(recs, Record{Kind: KindEnd, Term: l.Term, At: protocol.Timestamp{Time: l.EndedAt}, Reason: string(l.EndReason)})
		}
	}
	for _, s := range kept.SplitBrains {
		recs = append(recs, Record{Kind: KindSplit, At: protocol.Timestamp{Time: s.At}, Reason: s.Reason, Leaders: s.Leaders[:]})
	}
	for _, f := range kept.Faulty {
		recs = append(recs, faultyRecord(f))
	}
	for _, e := range kept.Membership {
		recs = append(recs, memberRecord(e))
	}
	return kept, recs
}

// memberRecord is the record of e.
func memberRecord(e MemberEvent) Record {
	return Record{Kind: KindMember, Member: e.Member, Event: e.Event, Reason: e.Reason, Seq: e.Seq, At: protocol.Timestamp{Time: e.At}}
}

// faultyRecord is the record of f.
func faultyRecord(f Faulty) Record {
	e := f.Evidence
	return Record{Kind: KindFaulty, Member: f.Member, At: protocol.Timestamp{Time: f.At}, Evidence: &e}
}

// clone returns a copy, for readers outside the store's lock. The
// evidence is shared: it is never changed once recorded.
func (c *Cluster) clone() *Cluster {
	return &Cluster{Leaderships: slices.Clone(c.Leaderships), SplitBrains: slices.Clone(c.SplitBrains), Floor: c.Floor, Faulty: slices.Clone(c.Faulty),
		Membership: slices.Clone(c.Membership), memberSeq: c.memberSeq, stale: c.stale, flaps: c.flaps}
}

// SplitBrainOf reports whether l took part in a split-brain event.
func (c *Cluster) SplitBrainOf(l Leadership) bool {
	for _, s := range c.SplitBrains {
		for _, a := range s.Leaders {
			if a.Leader == l.Leader && a.Term == l.Term {
				return true
			}
		}
	}
	return false
}

// GapBefore returns how long the cluster had no leader before the
// leadership at index i, and whether that is known: it is not for the
// first recorded leadership nor after an unobserved end.
func (c *Cluster) GapBefore(i int) (time.Duration, bool) {
	if i <= 0 || i >= len(c.Leaderships) {
		return 0, false
	}
	prev := c.Leaderships[i-1]
	if !prev.Ended() || prev.EndReason == EndUnobserved {
		return 0, false
	}
	return max(0, c.Leaderships[i].StartedAt.Sub(prev.EndedAt)), true
}

// Flap reports whether the leadership at index i is a flap: a leader
// change reversed within FlapWindow. It is when the leaderships just
// before and just after it (in term order) have one leader, another than
// its own, and the one after started less than FlapWindow after it, as
// their announcements' `at` say (the two leaders' clocks). The first
// leadership the history holds and the latest are not flaps: the one has
// no leadership before it (none, or compacted away), the other none after
// it yet.
func (c *Cluster) Flap(i int) bool { return flapAt(c.Leaderships, i) }

// flapAt is Flap over ls.
func flapAt(ls []Leadership, i int) bool {
	if i <= 0 || i >= len(ls)-1 {
		return false
	}
	prev, l, next := ls[i-1], ls[i], ls[i+1]
	return prev.Leader == next.Leader && l.Leader != prev.Leader && next.StartedAt.Sub(l.StartedAt) < FlapWindow
}

// Flaps returns how many of the leaderships the history holds are flaps.
func (c *Cluster) Flaps() int { return c.flaps }

// NewFlaps returns the indices of the leaderships that the leadership at
// index i made flaps, in increasing order: usually the one before it,
// which it reversed; for a term recorded out of order (a lower term after
// a higher one), possibly itself or the one after. A leadership that was
// a flap before is not named again.
func (c *Cluster) NewFlaps(i int) []int {
	gained, _ := c.flapChange(i)
	return gained
}

// flapChange compares the flaps next to index i (at i-1, i and i+1) with
// the leadership at i and without it: gained are the indices of those
// that are flaps with it only, lost counts those that were flaps without
// it only.
func (c *Cluster) flapChange(i int) (gained []int, lost int) {
	if i < 0 || i >= len(c.Leaderships) {
		return nil, 0
	}
	// Flap(j) reads j-1 and j+1: the leaderships from i-2 to i+2 decide.
	lo, hi := max(0, i-2), min(len(c.Leaderships), i+3)
	with := c.Leaderships[lo:hi]
	without := slices.Delete(slices.Clone(with), i-lo, i-lo+1)
	for j := max(0, i-1); j <= min(i+1, len(c.Leaderships)-1); j++ {
		is, was := flapAt(with, j-lo), false
		switch {
		case j < i:
			was = flapAt(without, j-lo)
		case j > i:
			was = flapAt(without, j-lo-1)
		}
		switch {
		case is && !was:
			gained = append(gained, j)
		case was && !is:
			lost++
		}
	}
	return gained, lost
}
