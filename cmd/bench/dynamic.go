package main

// Members that come and go: clusters with dynamic membership
// (ELECTION_MEMBERSHIP=dynamic), measured with -membership dynamic.
//
// A dynamic cluster of n members has the IDs 1..n like a static one, and
// no NODE_PEERS: each member counts those it hears. The benchmark starts
// members 1..n-1, then, in every round, takes member n (the highest ID,
// which leads once present) and member m (below it: the lowest ID that
// does not vote, lowMember) out and back:
//
//	SIGKILL n, start n; SIGTERM n, start n; SIGSTOP n, SIGCONT n;
//	SIGKILL m, start m; SIGTERM m, start m; SIGSTOP m, SIGCONT m
//
// after a first start of n. A member started again gets an empty data
// directory: it joins as a new member would. Paxos members vote only if
// they are among ELECTION_VOTERS, the lowest IDs (paxosVoters), which
// never leave. Member m is not n-1, the leader's successor where the
// algorithm allows (Bully, the ring): a member that was stopped for
// seconds waits up to 16 times the leader time-out before it suspects a
// silent leader (its own pauses count as the leader's), which would
// delay the next round's failover by seconds.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/freeport"
	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

// Values of -membership.
const (
	membershipStatic  = "static"
	membershipDynamic = "dynamic"
)

// parseMembership reads -membership: static, dynamic, or both,
// comma-separated, in any order.
func parseMembership(s string) (static, dynamic bool, err error) {
	for k := range strings.SplitSeq(s, ",") {
		switch k = strings.TrimSpace(k); k {
		case "":
		case membershipStatic:
			if static {
				return false, false, fmt.Errorf("-membership: %s twice", k)
			}
			static = true
		case membershipDynamic:
			if dynamic {
				return false, false, fmt.Errorf("-membership: %s twice", k)
			}
			dynamic = true
		default:
			return false, false, fmt.Errorf("-membership: %q is not %s or %s", k, membershipStatic, membershipDynamic)
		}
	}
	if !static && !dynamic {
		return false, false, errors.New("-membership names neither static nor dynamic")
	}
	return static, dynamic, nil
}

// dynamicAlgorithms are the algorithms of algorithms that run with
// dynamic membership: all but byzantine.
func dynamicAlgorithms(algorithms []protocol.Algorithm) []protocol.Algorithm {
	var out []protocol.Algorithm
	for _, a := range algorithms {
		if a != protocol.Byzantine {
			out = append(out, a)
		}
	}
	return out
}

// paxosVoters are the voters of a dynamic Paxos cluster of n members: the
// 3 lowest IDs, the 5 lowest from 25 members. They never leave, so the
// members that come and go (n and lowMember) are candidates, and a quorum
// stays.
func paxosVoters(n int) []uint64 {
	v := 3
	if n >= 25 {
		v = 5
	}
	ids := make([]uint64, v)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	return ids
}

// lowMember is the member below the leader that comes and goes in a
// dynamic cluster of algorithm at n members: the lowest ID that does not
// vote, 1 but for Paxos.
func lowMember(algorithm protocol.Algorithm, n int) uint64 {
	if algorithm == protocol.Paxos {
		return uint64(len(paxosVoters(n)) + 1)
	}
	return 1
}

// checkDynamicSizes tells whether every size of plan suits a dynamic
// cluster of its algorithm: member n and a member below it come and go
// while another stays, so at least 3 members, and for Paxos two more
// than its voters.
func checkDynamicSizes(algorithms []protocol.Algorithm, plan map[protocol.Algorithm][]int) error {
	for _, a := range dynamicAlgorithms(algorithms) {
		for _, n := range plan[a] {
			if n < 3 {
				return fmt.Errorf("-membership dynamic: %s at %d members: member %d and one below it come and go while another stays, so at least 3", a, n, n)
			}
			if v := len(paxosVoters(n)); a == protocol.Paxos && n < v+2 {
				return fmt.Errorf("-membership dynamic: paxos at %d members: its %d voters stay while member %d and one below it come and go, so at least %d", n, v, n, v+2)
			}
		}
	}
	return nil
}

// dynamicClusterName is the name of the dynamic cluster of algorithm at
// size.
func dynamicClusterName(algorithm protocol.Algorithm, size int) string {
	return fmt.Sprintf("bench-dynamic-%s-%d", algorithm, size)
}

// typeCounts are message counts by type.
type typeCounts map[protocol.Type]int

func (t typeCounts) total() int {
	s := 0
	for _, v := range t {
		s += v
	}
	return s
}

// joinSample is one start of a member into a dynamic cluster. Times are
// from the start of its process.
type joinSample struct {
	presence time.Duration // until the benchmark received its first presence broadcast
	seen     time.Duration // until every member's /status lists it
	knows    time.Duration // until its own /status lists every member
	leader   time.Duration // until every member names the expected leader (the joiner if it is the highest)
	msgs     typeCounts    // the nodes' publications, steady traffic excepted
	newTerms int           // terms announced above every earlier one
	started  int           // elections the nodes started
}

// departSample is one departure from a dynamic cluster. Times are from
// the signal.
type departSample struct {
	leader   time.Duration // until the survivors name the new leader (a leader's departure)
	removed  time.Duration // until no survivor's /status lists it
	msgs     typeCounts
	newTerms int
	started  int
}

// resumeSample is a stopped member's return (SIGCONT): until every member
// lists it again and names the expected leader.
type resumeSample struct {
	back     time.Duration
	newTerms int
}

// dynResult holds the measurements of one algorithm at one size with
// dynamic membership.
type dynResult struct {
	algorithm protocol.Algorithm
	n         int
	voters    []uint64 // paxos
	err       error

	coldStart time.Duration // n-1 members, until they agree and list each other
	idleCPU   []float64
	rss       []int64
	presences float64 // presence broadcasts per second, the cluster of n members at idle

	low                                 uint64         // the member below the leader that comes and goes
	joinTop, joinLow                    []joinSample   // the highest ID; low, below the leader
	leaderCrash, leaderTerm, leaderHang []departSample // SIGKILL, SIGTERM, SIGSTOP of the leader n
	memberCrash, memberTerm, memberHang []departSample // the same of low
	resumedLeader, resumedMember        []resumeSample // SIGCONT after SIGSTOP
	termRegressions                     int
}

// nodeCounts is what one node's /metrics said, and when.
type nodeCounts struct {
	at        time.Time
	sent      map[protocol.Type]float64
	elections float64
}

// sentByType reads election_messages_sent_total of m by its type label.
func sentByType(m localcluster.Metrics) map[protocol.Type]float64 {
	const name = "election_messages_sent_total{"
	out := map[protocol.Type]float64{}
	for series, v := range m {
		labels, ok := strings.CutPrefix(series, name)
		if !ok {
			continue
		}
		_, rest, ok := strings.Cut(labels, `type="`)
		if !ok {
			continue
		}
		typ, _, ok := strings.Cut(rest, `"`)
		if !ok {
			continue
		}
		out[protocol.Type(typ)] += v
	}
	return out
}

// countsOf reads the publications by type and the elections started of
// each node of nodes, one after the other, with the time of each reading.
func (e *environment) countsOf(ctx context.Context, nodes []*localcluster.Node) map[uint64]nodeCounts {
	out := make(map[uint64]nodeCounts, len(nodes))
	for _, n := range nodes {
		m, err := localcluster.FetchMetrics(ctx, e.http, n.HTTPAddr)
		if err != nil {
			continue
		}
		out[n.ID] = nodeCounts{at: time.Now(), sent: sentByType(m), elections: m.Sum("election_elections_started_total")}
	}
	return out
}

// presenceSeen is a presence broadcast the benchmark received.
type presenceSeen struct {
	from uint64
	at   time.Time
}

// countDelta is what the nodes published between two readings, by type:
// heartbeats not at all; presence broadcasts that the benchmark saw from
// each node between its two readings, but first (the joiner's first
// broadcast, which the join costs), not either; the other types less
// steady (their idle rate times span). A node missing from after is not
// counted; one missing from before, or whose count went down, counts
// from zero (it started meanwhile). It also returns the elections
// started.
func countDelta(before, after map[uint64]nodeCounts, seen []presenceSeen, first *presenceSeen, steady map[protocol.Type]float64, span time.Duration) (typeCounts, int) {
	sums := map[protocol.Type]float64{}
	elections := 0.0
	for id, a := range after {
		b, ok := before[id]
		restarted := !ok || a.elections < b.elections
		for t, v := range a.sent {
			if !restarted && b.sent[t] <= v {
				v -= b.sent[t]
			}
			sums[t] += v
		}
		e := a.elections
		if !restarted {
			e -= b.elections
		}
		elections += e
		for _, p := range seen {
			if p.from != id || (ok && !restarted && !p.at.After(b.at)) || p.at.After(a.at) {
				continue
			}
			if first != nil && p == *first {
				continue
			}
			sums[protocol.TypePresence]--
		}
	}
	out := typeCounts{}
	for t, v := range sums {
		if t == protocol.TypeHeartbeat {
			continue
		}
		if t != protocol.TypePresence {
			v -= steady[t] * span.Seconds()
		}
		if n := int(v + 0.5); n > 0 {
			out[t] = n
		}
	}
	return out, int(elections + 0.5)
}

// memberCond is a condition on the members a node lists.
type memberCond func(members []uint64) bool

func lists(id uint64) memberCond {
	return func(m []uint64) bool { return slices.Contains(m, id) }
}

func listsNot(id uint64) memberCond {
	return func(m []uint64) bool { return !slices.Contains(m, id) }
}

func listsExactly(ids []uint64) memberCond {
	return func(m []uint64) bool { return slices.Equal(m, ids) }
}

// pollInterval is how long to wait between two polls of a node's
// /status, elapsed after the start of what is measured: a 25th of it,
// from base to limit, so that a time is late by about 4% at most
// (and base at least) without loading the machine for the seconds a
// hung member takes to leave.
func pollInterval(elapsed, base, limit time.Duration) time.Duration {
	return min(max(elapsed/25, base), limit)
}

// pollBounds are pollInterval's base and limit for a cluster of n
// members: 1 ms and 20 ms at 5 members; at 101, where 100 nodes are
// polled at once, 10 ms and 200 ms.
func pollBounds(n int) (base, limit time.Duration) {
	base = max(time.Millisecond, time.Duration(n)*100*time.Microsecond)
	return base, 20 * base
}

// waitMembers polls the /status of each node of conds until what it
// lists meets its condition, and returns when the last of them was seen
// to (the first time each did). It polls from t0's pace (pollInterval).
func (e *environment) waitMembers(ctx context.Context, conds map[*localcluster.Node]memberCond, t0 time.Time, n int) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	base, limit := pollBounds(n)
	var (
		mu      sync.Mutex
		last    time.Time
		pending = map[uint64][]uint64{} // what each node not done listed last
		wg      sync.WaitGroup
	)
	for node := range conds {
		pending[node.ID] = nil
	}
	for node, cond := range conds {
		wg.Go(func() {
			for ctx.Err() == nil {
				s, err := localcluster.FetchStatus(ctx, e.http, node.HTTPAddr)
				now := time.Now()
				if err == nil && cond(s.Members) {
					mu.Lock()
					delete(pending, node.ID)
					last = later(last, now)
					mu.Unlock()
					return
				}
				if err == nil {
					mu.Lock()
					pending[node.ID] = s.Members
					mu.Unlock()
				}
				timer := time.NewTimer(pollInterval(now.Sub(t0), base, limit))
				select {
				case <-ctx.Done():
				case <-timer.C:
				}
				timer.Stop()
			}
		})
	}
	wg.Wait()
	if len(pending) > 0 {
		if errors.Is(ctx.Err(), context.Canceled) {
			return time.Time{}, ctx.Err()
		}
		var b strings.Builder
		ids := slices.Sorted(maps.Keys(pending))
		for i, id := range ids {
			if i == 5 {
				fmt.Fprintf(&b, "; and %d more", len(ids)-i)
				break
			}
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "node %d lists %s", id, idList(pending[id], 12))
		}
		return time.Time{}, fmt.Errorf("member lists not as expected within %s: %s", e.cfg.timeout, b.String())
	}
	return later(last, t0), nil
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// idList renders ids, at most max of them.
func idList(ids []uint64, most int) string {
	if ids == nil {
		return "nothing yet"
	}
	var parts []string
	for i, id := range ids {
		if i == most {
			parts = append(parts, fmt.Sprintf("… (%d)", len(ids)))
			break
		}
		parts = append(parts, strconv.FormatUint(id, 10))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// dynCluster is a dynamic cluster being measured: its nodes, which of
// them are members now, and what its measurements share.
type dynCluster struct {
	e       *environment
	res     *dynResult
	w       *wire
	v       *views
	nodes   []*localcluster.Node // IDs 1..n
	present map[uint64]bool
	dataDir string
	// steady is each type's rate at idle (publications per second, the
	// cluster), heartbeats and presence broadcasts aside: Paxos lease
	// renewals and their acceptances.
	steady map[protocol.Type]float64
}

// members are the nodes present, in ID order.
func (c *dynCluster) members() []*localcluster.Node {
	var out []*localcluster.Node
	for _, n := range c.nodes {
		if c.present[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

func ids(nodes []*localcluster.Node) []uint64 {
	out := make([]uint64, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// highest is the member with the highest ID, which leads.
func highest(nodes []*localcluster.Node) *localcluster.Node { return nodes[len(nodes)-1] }

// firstPresence waits until the benchmark has received a presence
// broadcast of id at or after t0, and returns it.
func (c *dynCluster) firstPresence(ctx context.Context, id uint64, t0 time.Time, node *localcluster.Node) (presenceSeen, error) {
	deadline := time.Now().Add(c.e.cfg.timeout)
	for {
		if p, ok := c.w.presenceFrom(id, t0); ok {
			return p, nil
		}
		if !node.Running() {
			return presenceSeen{}, fmt.Errorf("node %d exited: %v; see %s", id, node.ExitErr(), node.LogPath)
		}
		if time.Now().After(deadline) {
			return presenceSeen{}, fmt.Errorf("no presence broadcast of node %d within %s; see %s", id, c.e.cfg.timeout, node.LogPath)
		}
		select {
		case <-ctx.Done():
			return presenceSeen{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// agreement is when the members agreed on a leader, or why not.
type agreement struct {
	at  time.Time
	err error
}

// agreedFrom waits, from now on and beside what the caller waits for,
// until every node of members names the highest of them as the leader
// (waitAgreed, from t0): the first moment they do, not a later one after
// a change of their status that the caller waited through.
func (c *dynCluster) agreedFrom(ctx context.Context, members []*localcluster.Node, t0 time.Time) <-chan agreement {
	ch := make(chan agreement, 1)
	go func() {
		at, err := c.e.waitAgreed(ctx, c.v, members, highest(members).ID, t0)
		ch <- agreement{at, err}
	}()
	return ch
}

// join starts node's process (with an empty data directory) and measures
// until every member lists it, it lists every member, every member names
// the highest of them as the leader, and the cluster is quiet.
func (c *dynCluster) join(ctx context.Context, node *localcluster.Node) (j joinSample, err error) {
	e := c.e
	if err := os.RemoveAll(filepath.Join(c.dataDir, dynamicClusterName(c.res.algorithm, c.res.n), fmt.Sprintf("node-%d", node.ID))); err != nil {
		return j, err
	}
	others := c.members()
	c.w.resetPresences()
	s0 := e.snapshot(c.w)
	m0 := e.countsOf(ctx, others)
	t0 := time.Now()
	if err := node.Start(); err != nil {
		return j, err
	}
	c.present[node.ID] = true
	members := c.members()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agreed := c.agreedFrom(ctx, members, t0)
	p, err := c.firstPresence(ctx, node.ID, t0, node)
	if err != nil {
		return j, err
	}
	j.presence = p.at.Sub(t0)
	conds := map[*localcluster.Node]memberCond{node: listsExactly(ids(members))}
	for _, o := range others {
		conds[o] = lists(node.ID)
	}
	seen, err := e.waitMembersSplit(ctx, conds, node, p.at, len(c.nodes))
	if err != nil {
		return j, fmt.Errorf("join of node %d: %w", node.ID, err)
	}
	j.seen, j.knows = seen.others.Sub(t0), seen.self.Sub(t0)
	a := <-agreed
	if a.err != nil {
		return j, fmt.Errorf("join of node %d: %w", node.ID, a.err)
	}
	at := a.at
	j.leader = at.Sub(t0)
	if err := e.waitQuiet(ctx, c.w); err != nil {
		return j, err
	}
	m1 := e.countsOf(ctx, members)
	s1 := e.snapshot(c.w)
	j.msgs, j.started = countDelta(m0, m1, c.w.presencesSince(time.Time{}), &p, c.steady, s1.at.Sub(t0))
	j.newTerms = s1.newTerms - s0.newTerms
	return j, nil
}

// splitTimes are when the others were last seen to list a joiner, and
// when it was seen to list them.
type splitTimes struct{ others, self time.Time }

// waitMembersSplit is waitMembers, timing the joiner self apart from the
// others.
func (e *environment) waitMembersSplit(ctx context.Context, conds map[*localcluster.Node]memberCond, self *localcluster.Node, t0 time.Time, n int) (splitTimes, error) {
	var st splitTimes
	var errSelf, errOthers error
	var wg sync.WaitGroup
	wg.Go(func() {
		st.self, errSelf = e.waitMembers(ctx, map[*localcluster.Node]memberCond{self: conds[self]}, t0, n)
	})
	others := maps.Clone(conds)
	delete(others, self)
	st.others, errOthers = e.waitMembers(ctx, others, t0, n)
	wg.Wait()
	return st, errors.Join(errOthers, errSelf)
}

// depart sends sig to node and measures until no survivor lists it, the
// survivors name the highest of them as the leader, and the cluster is
// quiet. After SIGSTOP the node stays stopped (resume).
func (c *dynCluster) depart(ctx context.Context, node *localcluster.Node, sig syscall.Signal) (d departSample, err error) {
	e := c.e
	wasLeader := node == highest(c.members())
	all := c.members()
	c.w.resetPresences()
	s0 := e.snapshot(c.w)
	m0 := e.countsOf(ctx, all)
	t0 := time.Now()
	if err := node.Signal(sig); err != nil {
		return d, err
	}
	c.present[node.ID] = false
	survivors := c.members()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agreed := c.agreedFrom(ctx, survivors, t0)
	conds := map[*localcluster.Node]memberCond{}
	for _, s := range survivors {
		conds[s] = listsNot(node.ID)
	}
	removed, err := e.waitMembers(ctx, conds, t0, len(c.nodes))
	if err != nil {
		return d, fmt.Errorf("after %s of node %d: %w", sig, node.ID, err)
	}
	d.removed = removed.Sub(t0)
	a := <-agreed
	if a.err != nil {
		return d, fmt.Errorf("after %s of node %d: %w", sig, node.ID, a.err)
	}
	at := a.at
	if wasLeader {
		d.leader = at.Sub(t0)
	}
	if sig != syscall.SIGSTOP {
		node.Wait()
	}
	if err := e.waitQuiet(ctx, c.w); err != nil {
		return d, err
	}
	m1 := e.countsOf(ctx, survivors)
	s1 := e.snapshot(c.w)
	span := s1.at.Sub(t0)
	if wasLeader {
		span = s1.at.Sub(at) // no renewals while no one leads
	}
	d.msgs, d.started = countDelta(m0, m1, c.w.presencesSince(time.Time{}), nil, c.steady, span)
	d.newTerms = s1.newTerms - s0.newTerms
	return d, nil
}

// resume continues a stopped node and measures until every other member
// lists it and every member names the highest member as the leader; then
// it waits, untimed, until every member lists every member (the resumed
// one may have dropped them all), and for quiet.
func (c *dynCluster) resume(ctx context.Context, node *localcluster.Node) (r resumeSample, err error) {
	e := c.e
	s0 := e.snapshot(c.w)
	t0 := time.Now()
	if err := node.Signal(syscall.SIGCONT); err != nil {
		return r, err
	}
	c.present[node.ID] = true
	members := c.members()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agreed := c.agreedFrom(ctx, members, t0)
	conds := map[*localcluster.Node]memberCond{}
	for _, m := range members {
		if m != node {
			conds[m] = lists(node.ID)
		}
	}
	listed, err := e.waitMembers(ctx, conds, t0, len(c.nodes))
	if err != nil {
		return r, fmt.Errorf("after SIGCONT of node %d: %w", node.ID, err)
	}
	a := <-agreed
	if a.err != nil {
		return r, fmt.Errorf("after SIGCONT of node %d: %w", node.ID, a.err)
	}
	r.back = later(a.at, listed).Sub(t0)
	for _, m := range members {
		conds[m] = listsExactly(ids(members))
	}
	if _, err := e.waitMembers(ctx, conds, time.Now(), len(c.nodes)); err != nil {
		return r, fmt.Errorf("after SIGCONT of node %d: %w", node.ID, err)
	}
	if err := e.waitQuiet(ctx, c.w); err != nil {
		return r, err
	}
	r.newTerms = e.snapshot(c.w).newTerms - s0.newTerms
	return r, nil
}

// measureDynamic runs the measurements of members that come and go for
// one algorithm and size on a fresh dynamic cluster. On error the result
// holds what was measured so far.
func (e *environment) measureDynamic(ctx context.Context, algorithm protocol.Algorithm, size int) (res *dynResult, err error) {
	res = &dynResult{algorithm: algorithm, n: size}
	defer func() { res.err = err }()
	name := dynamicClusterName(algorithm, size)
	w := &wire{}
	// As measure: the broadcast subjects (presence among them) and the
	// leader subject, not the inboxes nor the query subject.
	unsubscribe, err := e.listen(w, name, algorithm)
	if err != nil {
		return res, err
	}
	defer unsubscribe()
	defer func() {
		w.mu.Lock()
		res.termRegressions = w.regressions
		for _, r := range w.regressed {
			fmt.Fprintf(e.out, "  announced term not increasing: %s\n", r)
		}
		w.mu.Unlock()
	}()
	addrs, err := freeport.Addrs(size)
	if err != nil {
		return res, err
	}
	all := make([]uint64, size)
	for i := range all {
		all[i] = uint64(i + 1)
	}
	c := &dynCluster{e: e, res: res, w: w, present: map[uint64]bool{}, dataDir: filepath.Join(e.cfg.logDir, name+"-data")}
	c.nodes, err = e.newNodes(localcluster.Spec{
		Binary: e.cfg.binary, NATSURL: e.natsURL, Cluster: name, Algorithm: string(algorithm),
		IDs: all, HTTPAddrs: addrs, LogDir: filepath.Join(e.cfg.logDir, name), DataDir: c.dataDir,
	})
	if err != nil {
		return res, err
	}
	env := []string{"NODE_PEERS=", "ELECTION_MEMBERSHIP=dynamic"}
	if algorithm == protocol.Paxos {
		res.voters = paxosVoters(size)
		var vs []string
		for _, id := range res.voters {
			vs = append(vs, strconv.FormatUint(id, 10))
		}
		env = append(env, "ELECTION_VOTERS="+strings.Join(vs, ","))
	}
	for _, n := range c.nodes {
		for _, kv := range env { // the last of a variable set twice counts
			n.Setenv(kv)
		}
	}
	defer func() {
		for _, n := range c.nodes {
			n.Signal(syscall.SIGCONT) // a member left stopped by an error stops, too
		}
		localcluster.StopAll(c.nodes, stopGrace)
	}()
	c.v = e.follow(ctx, c.nodes)
	defer c.v.close()
	res.low = lowMember(algorithm, size)
	top, low := c.nodes[size-1], c.nodes[res.low-1]

	// The n-1 members below the highest.
	first := c.nodes[:size-1]
	start := time.Now()
	if _, err := startAll(first, e.cfg.order); err != nil {
		return res, err
	}
	for _, n := range first {
		c.present[n.ID] = true
	}
	conds := map[*localcluster.Node]memberCond{}
	for _, n := range first {
		conds[n] = listsExactly(ids(first))
	}
	listed, err := e.waitMembers(ctx, conds, start, size)
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	at, err := e.waitAgreed(ctx, c.v, first, highest(first).ID, start)
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	res.coldStart = later(at, listed).Sub(start)
	if err := e.waitQuiet(ctx, w); err != nil {
		return res, err
	}
	fmt.Fprintf(e.out, "  cold start of %d members: %s\n", size-1, ms(res.coldStart))

	// Idle, n-1 members: each type's steady rate, for the counts.
	m0 := e.countsOf(ctx, first)
	scratch := &result{}
	if err := e.idle(ctx, scratch, w, first); err != nil {
		return res, fmt.Errorf("idle: %w", err)
	}
	m1 := e.countsOf(ctx, first)
	c.steady = map[protocol.Type]float64{}
	for id, a := range m1 {
		b, ok := m0[id]
		if !ok {
			continue
		}
		span := a.at.Sub(b.at).Seconds()
		for t, v := range a.sent {
			if t != protocol.TypeHeartbeat && t != protocol.TypePresence && span > 0 {
				c.steady[t] += (v - b.sent[t]) / span
			}
		}
	}

	fmt.Fprintf(e.out, "  join of node %d\n", top.ID)
	j, err := c.join(ctx, top)
	if err != nil {
		return res, err
	}
	res.joinTop = append(res.joinTop, j)

	// Idle, n members: CPU, memory and presence broadcasts.
	c.w.resetPresences()
	p0 := time.Now()
	if err := e.idle(ctx, scratch, w, c.nodes); err != nil {
		return res, fmt.Errorf("idle: %w", err)
	}
	res.idleCPU, res.rss = scratch.idleCPU, scratch.rss
	res.presences = float64(len(c.w.presencesSince(p0))) / time.Since(p0).Seconds()

	for round := range e.cfg.rounds[size] {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		for _, node := range []*localcluster.Node{top, low} {
			crash, term, hang, resumed := &res.memberCrash, &res.memberTerm, &res.memberHang, &res.resumedMember
			joins := &res.joinLow
			if node == top {
				crash, term, hang, resumed = &res.leaderCrash, &res.leaderTerm, &res.leaderHang, &res.resumedLeader
				joins = &res.joinTop
			}
			for _, step := range []struct {
				sig     syscall.Signal
				samples *[]departSample
			}{{syscall.SIGKILL, crash}, {syscall.SIGTERM, term}, {syscall.SIGSTOP, hang}} {
				d, err := c.depart(ctx, node, step.sig)
				if err != nil {
					return res, fmt.Errorf("round %d: %w", round+1, err)
				}
				*step.samples = append(*step.samples, d)
				if step.sig == syscall.SIGSTOP {
					r, err := c.resume(ctx, node)
					if err != nil {
						return res, fmt.Errorf("round %d: %w", round+1, err)
					}
					*resumed = append(*resumed, r)
					continue
				}
				j, err := c.join(ctx, node)
				if err != nil {
					return res, fmt.Errorf("round %d: %w", round+1, err)
				}
				*joins = append(*joins, j)
			}
		}
		fmt.Fprintf(e.out, "  round %d: leader crash %s, SIGTERM %s, hang %s; join of the highest %s, below it %s\n", round+1,
			ms(res.leaderCrash[round].leader), ms(res.leaderTerm[round].leader), ms(res.leaderHang[round].leader),
			ms(res.joinTop[len(res.joinTop)-1].seen), ms(res.joinLow[len(res.joinLow)-1].seen))
	}
	for _, r := range localcluster.StopAll(c.nodes, stopGrace) {
		if r.Killed || r.Err != nil {
			return res, fmt.Errorf("node %d did not stop cleanly: killed=%t, %v", r.Node.ID, r.Killed, r.Err)
		}
	}
	return res, nil
}
