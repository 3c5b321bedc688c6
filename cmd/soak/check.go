package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// The checker is the soak's judge: it is fed, from outside the nodes,
// every announcement heard on the leader subjects and every poll of a
// node's /elections, and says which rule of the contract they break.
// It holds no lock and starts nothing: its caller serializes the calls
// (and the unit tests feed it synthetic histories).

// Violation is one broken rule.
type Violation struct {
	At      time.Time
	Cluster string // empty for a violation of the deployment (a process that died)
	Rule    string // one of the rule constants
	Text    string
}

func (v Violation) String() string {
	if v.Cluster == "" {
		return fmt.Sprintf("%s: %s", v.Rule, v.Text)
	}
	return fmt.Sprintf("%s: %s: %s", v.Rule, v.Cluster, v.Text)
}

// The rules.
const (
	// RuleTermOwner: two different leaders for one term (announced, or
	// named in a status).
	RuleTermOwner = "one-leader-per-term"
	// RuleLeaderTerms: one leader's announcements, in the order it made
	// them, with terms that do not increase.
	RuleLeaderTerms = "leader-terms-increase"
	// RuleViewTerm: a process's own term went back between two polls.
	RuleViewTerm = "view-term-never-back"
	// RuleLeases: two leaders of a lease algorithm (Paxos, byzantine)
	// whose leases, as they reported them, overlap in real time, where
	// the earlier could not have handed over (see lease).
	RuleLeases = "one-lease-at-once"
	// RuleLeaderOrder: with a lease algorithm, a node reporting itself
	// leader in a term after another had reported itself leader in a
	// higher one (the second poll sent after the first was answered).
	RuleLeaderOrder = "leaders-in-term-order"
	// RuleHeal: an election not led again (one live leader every live
	// member names) within the heal bound after a fault.
	RuleHeal = "led-again-after-fault"
	// RuleProcess: a node process that exited without being told to.
	RuleProcess = "process-exit"
)

// Poll is one answer of a node's GET /elections.
type Poll struct {
	ID uint64 // the node's NODE_ID
	// Run tells the runs of a process apart: it changes each time the
	// process is started again.
	Run int
	// Sent and Recv are when the request left and when the answer was
	// read: every status in it was true at some instant between.
	Sent, Recv time.Time
	Statuses   []protocol.Status
}

// Unled is an election that is not led as the heal rule asks, and why.
type Unled struct {
	Cluster string
	Why     string
}

// Checker checks the rules over the histories it is fed.
type Checker struct {
	leases bool          // the algorithm holds leases (Paxos)
	slack  time.Duration // taken off each lease interval
	// spread: the members are ranked per election by rendezvous hashing
	// (election.Spread), as the nodes rank them by default with several
	// elections; otherwise by ID.
	spread bool
	names  []string // the elections, in order
	byName map[string]*electionState

	// resigned is, per node, when the soak last asked it to leave
	// (SIGTERM): a leader then hands over before its lease ends.
	resigned map[uint64]time.Time

	violations    []Violation
	announcements int // distinct announcements
	repeats       int // announcements of a leader and term already heard
}

// leaseKeep is how long a lease interval is kept after it ended, to be
// compared with the intervals of reports that arrive late.
const leaseKeep = 10 * time.Second

// electionState is what the checker keeps of one election.
type electionState struct {
	// owner is, per term, the leader it belongs to and where that was
	// first seen.
	owner map[uint64]termOwner
	// byLeader are each leader's announcements, sorted by their time.
	byLeader map[uint64][]stamp
	// views are the last status of each process.
	views map[uint64]view
	// leaseIntervals are the recent lease intervals of its leaders.
	leaseIntervals []leaseInterval
	// leaderReports are the recent reports of a node leading, and
	// settledTerm the highest term of those forgotten (answered longer
	// than leaseKeep ago: before the sending of any poll still to come).
	leaderReports []leaderReport
	settledTerm   uint64
}

type leaderReport struct {
	id         uint64
	term       uint64
	sent, recv time.Time
}

type termOwner struct {
	leader uint64
	source string
}

type stamp struct {
	at   time.Time
	term uint64
}

type view struct {
	run        int
	sent, recv time.Time
	status     protocol.Status
}

type leaseInterval struct {
	leader     uint64
	sent       time.Time // when the poll that reported it was sent
	start, end time.Time
}

// NewChecker checks the elections names, which run algorithm; slack is
// taken off the end of every lease interval (the reported milliseconds
// are truncated, and the clocks are read at slightly different moments).
func NewChecker(algorithm protocol.Algorithm, names []string, slack time.Duration) *Checker {
	c := &Checker{leases: algorithm.Leases(), slack: slack, spread: len(names) > 1, names: names, byName: make(map[string]*electionState, len(names)), resigned: map[uint64]time.Time{}}
	for _, n := range names {
		c.byName[n] = &electionState{owner: map[uint64]termOwner{}, byLeader: map[uint64][]stamp{}, views: map[uint64]view{}}
	}
	return c
}

// Add records a violation found by the caller (a process that died).
func (c *Checker) Add(v Violation) { c.violations = append(c.violations, v) }

// Violations are every violation found so far, in the order found.
func (c *Checker) Violations() []Violation { return c.violations }

// Announcements is the number of distinct announcements, and of repeats
// (a leader and term heard again with another time).
func (c *Checker) Announcements() (distinct, repeats int) { return c.announcements, c.repeats }

func (c *Checker) flag(at time.Time, cluster, rule, format string, args ...any) {
	c.violations = append(c.violations, Violation{At: at, Cluster: cluster, Rule: rule, Text: fmt.Sprintf(format, args...)})
}

// election is the state of cluster, nil (and a violation) if it is not
// one of the soak's.
func (c *Checker) election(at time.Time, cluster string) *electionState {
	e := c.byName[cluster]
	if e == nil {
		c.flag(at, cluster, RuleTermOwner, "not an election of the soak")
	}
	return e
}

// own records that term belongs to leader, as source says, and flags
// another leader already recorded for it.
func (c *Checker) own(at time.Time, cluster string, e *electionState, term, leader uint64, source string) {
	if term == 0 {
		return
	}
	o, ok := e.owner[term]
	if !ok {
		e.owner[term] = termOwner{leader: leader, source: source}
		return
	}
	if o.leader != leader {
		c.flag(at, cluster, RuleTermOwner, "term %d belongs to %d (%s) and to %d (%s)", term, o.leader, o.source, leader, source)
	}
}

// Announce records an announcement heard at recv. Copies of one
// announcement (the same message heard over several connections: the
// same leader, term and time) count once.
func (c *Checker) Announce(a protocol.Announcement, recv time.Time) {
	e := c.election(recv, a.Cluster)
	if e == nil {
		return
	}
	c.own(recv, a.Cluster, e, a.Term, a.Leader, fmt.Sprintf("announced at %s", a.At.Format(timeOfDay)))
	// The leader's announcements in the order it made them (their
	// times, from one clock): each must have a higher term than every
	// earlier one, across its restarts.
	s := stamp{at: a.At.Time, term: a.Term}
	list := e.byLeader[a.Leader]
	i := sort.Search(len(list), func(i int) bool { return list[i].at.After(s.at) })
	// list[:i] were made at or before s, list[i:] after.
	for _, p := range list {
		if p.term == s.term && p.at.Equal(s.at) {
			return // a copy, heard over another connection
		}
		if p.term == s.term {
			c.repeats++
			e.byLeader[a.Leader] = slices.Insert(list, i, s)
			return
		}
	}
	c.announcements++
	if i > 0 {
		if prev := maxTerm(list[:i]); prev > s.term {
			c.flag(recv, a.Cluster, RuleLeaderTerms, "leader %d announced term %d at %s, after term %d", a.Leader, s.term, s.at.Format(timeOfDay), prev)
		}
	}
	for _, p := range list[i:] {
		if p.term <= s.term {
			c.flag(recv, a.Cluster, RuleLeaderTerms, "leader %d announced term %d at %s, before term %d at %s", a.Leader, s.term, s.at.Format(timeOfDay), p.term, p.at.Format(timeOfDay))
			break
		}
	}
	e.byLeader[a.Leader] = slices.Insert(list, i, s)
}

func maxTerm(list []stamp) uint64 {
	var m uint64
	for _, p := range list {
		m = max(m, p.term)
	}
	return m
}

// timeOfDay formats the times of the violations.
const timeOfDay = "15:04:05.000"

// Poll records one answer of GET /elections.
func (c *Checker) Poll(p Poll) {
	for _, st := range p.Statuses {
		e := c.election(p.Recv, st.Cluster)
		if e == nil {
			continue
		}
		if old, ok := e.views[p.ID]; ok && old.run == p.Run && st.Term < old.status.Term {
			c.flag(p.Recv, st.Cluster, RuleViewTerm, "node %d reported term %d, then term %d", p.ID, old.status.Term, st.Term)
		}
		e.views[p.ID] = view{run: p.Run, sent: p.Sent, recv: p.Recv, status: st}
		switch {
		case st.State == "leader":
			c.own(p.Recv, st.Cluster, e, st.Term, p.ID, fmt.Sprintf("node %d leading at %s", p.ID, p.Recv.Format(timeOfDay)))
		case st.Leader != nil:
			c.own(p.Recv, st.Cluster, e, st.Term, *st.Leader, fmt.Sprintf("node %d following at %s", p.ID, p.Recv.Format(timeOfDay)))
		}
		if c.leases && st.State == "leader" {
			c.leaderOrder(p, st, e)
			if st.LeaseRemainingMS != nil && *st.LeaseRemainingMS > 0 {
				c.lease(p, st.Cluster, e, time.Duration(*st.LeaseRemainingMS)*time.Millisecond)
			}
		}
	}
}

// Resigned records that the soak asked node id to leave at at (SIGTERM):
// a leader hands over then, before its lease ends, so its leases are
// cut there.
func (c *Checker) Resigned(id uint64, at time.Time) {
	c.resigned[id] = at
	for _, e := range c.byName {
		for i, iv := range e.leaseIntervals {
			if iv.leader == id && iv.sent.Before(at) && iv.end.After(at) {
				e.leaseIntervals[i].end = at
			}
		}
	}
}

// leaderOrder flags a report of a node leading in a term below that of
// a report of leading answered before this one's poll was sent: with a
// lease algorithm a leader in a lower term cannot come after one in a
// higher term (the acceptors that promised the higher one refuse the
// lower), whether or not their leases were seen to overlap.
func (c *Checker) leaderOrder(p Poll, st protocol.Status, e *electionState) {
	kept := e.leaderReports[:0]
	var before leaderReport // the one of the highest term, if found
	for _, r := range e.leaderReports {
		if r.recv.Before(p.Sent.Add(-leaseKeep)) {
			e.settledTerm = max(e.settledTerm, r.term)
			continue
		}
		kept = append(kept, r)
		if r.recv.Before(p.Sent) && r.term > st.Term && r.term > before.term {
			before = r
		}
	}
	switch {
	case before.term != 0:
		c.flag(p.Recv, st.Cluster, RuleLeaderOrder, "node %d leading in term %d (poll sent %s), after node %d leading in term %d (answered %s)",
			p.ID, st.Term, p.Sent.Format(timeOfDay), before.id, before.term, before.recv.Format(timeOfDay))
	case e.settledTerm > st.Term:
		c.flag(p.Recv, st.Cluster, RuleLeaderOrder, "node %d leading in term %d (poll sent %s), after a leader in term %d more than %v before",
			p.ID, st.Term, p.Sent.Format(timeOfDay), e.settledTerm, leaseKeep)
	}
	e.leaderReports = append(kept, leaderReport{id: p.ID, term: st.Term, sent: p.Sent, recv: p.Recv})
}

// lease records the lease a leader reported and flags one of another
// leader that overlaps it. The status was made at some instant t between
// Sent and Recv, and the lease held from t for remaining: whatever t was,
// it held over [Recv, Sent+remaining], less the slack, unless the leader
// handed over before its lease ended, which a Paxos leader does when a
// higher node campaigns and when it leaves. So an overlap is not flagged
// when the later lease is a higher node's (by the election's rank: the
// IDs with one election, rendezvous hashing with several, as the nodes
// rank them by default), and a node's leases end when the soak asks it
// to leave (Resigned).
func (c *Checker) lease(p Poll, cluster string, e *electionState, remaining time.Duration) {
	iv := leaseInterval{leader: p.ID, sent: p.Sent, start: p.Recv, end: p.Sent.Add(remaining - c.slack)}
	if at, ok := c.resigned[p.ID]; ok && p.Sent.Before(at) && iv.end.After(at) {
		iv.end = at
	}
	if !iv.end.After(iv.start) {
		return
	}
	kept := e.leaseIntervals[:0]
	flagged := false
	for _, o := range e.leaseIntervals {
		if o.end.Before(iv.start.Add(-leaseKeep)) {
			continue
		}
		kept = append(kept, o)
		if flagged || o.leader == iv.leader || !o.start.Before(iv.end) || !iv.start.Before(o.end) {
			continue
		}
		// The earlier of the two may have handed over to the later.
		early, late := o, iv
		if iv.start.Before(o.start) {
			early, late = iv, o
		}
		if c.rank(cluster).Above(late.leader, early.leader) {
			continue
		}
		flagged = true
		c.flag(p.Recv, cluster, RuleLeases, "leases overlap: node %d leading over [%s, %s], node %d (lower: no hand-over) over [%s, %s]",
			early.leader, early.start.Format(timeOfDay), early.end.Format(timeOfDay), late.leader, late.start.Format(timeOfDay), late.end.Format(timeOfDay))
	}
	e.leaseIntervals = append(kept, iv)
}

// rank is how the nodes rank the members of cluster.
func (c *Checker) rank(cluster string) election.Rank {
	if c.spread {
		return election.Spread(cluster)
	}
	return election.ByID()
}

// Unled are the elections not led as the heal rule asks, as the polls
// sent at or after since show them: one leader, live, reporting itself
// leader, that every live process names, in one term. live are the
// processes that run and are not paused.
func (c *Checker) Unled(live []uint64, since time.Time) []Unled {
	var out []Unled
	for _, name := range c.names {
		if why := c.byName[name].unled(live, since); why != "" {
			out = append(out, Unled{Cluster: name, Why: why})
		}
	}
	return out
}

func (e *electionState) unled(live []uint64, since time.Time) string {
	if len(live) == 0 {
		return "no live process"
	}
	var (
		leader uint64
		term   uint64
	)
	for i, id := range live {
		v, ok := e.views[id]
		switch {
		case !ok || v.sent.Before(since):
			return fmt.Sprintf("no status of node %d yet", id)
		case v.status.Leader == nil:
			return fmt.Sprintf("node %d knows no leader (term %d, %s)", id, v.status.Term, v.status.State)
		case i == 0:
			leader, term = *v.status.Leader, v.status.Term
		case *v.status.Leader != leader || v.status.Term != term:
			return fmt.Sprintf("node %d names %d in term %d, node %d names %d in term %d", live[0], leader, term, id, *v.status.Leader, v.status.Term)
		}
	}
	if !slices.Contains(live, leader) {
		return fmt.Sprintf("every live node names %d (term %d), which is not live", leader, term)
	}
	if st := e.views[leader].status; st.State != "leader" {
		return fmt.Sprintf("every live node names %d (term %d), which reports %s", leader, term, st.State)
	}
	return ""
}

// HealFailed records that step's elections unled were not led again
// within bound.
func (c *Checker) HealFailed(at time.Time, step string, bound time.Duration, unled []Unled) {
	const shown = 5
	var b strings.Builder
	fmt.Fprintf(&b, "after %s, %d elections not led again within %v:", step, len(unled), bound)
	for i, u := range unled {
		if i == shown {
			fmt.Fprintf(&b, " and %d more", len(unled)-shown)
			break
		}
		fmt.Fprintf(&b, " %s (%s);", u.Cluster, u.Why)
	}
	c.violations = append(c.violations, Violation{At: at, Rule: RuleHeal, Text: strings.TrimSuffix(b.String(), ";")})
}
