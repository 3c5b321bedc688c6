package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/baton-election/baton/pkg/election"
)

// The shape of a churn run.
const (
	// MaxChurnID bounds the IDs of a churn run: members are drawn from 1
	// to MaxChurnID, so that a departed ID comes back as a new
	// incarnation, with its disk or without.
	MaxChurnID = 40
	// MaxPresent bounds how many nodes of a churn run run at once.
	MaxPresent = 12
	// maxChurnTicks bounds the churn phase of a run with faults.
	maxChurnTicks = 1200
	// minChurnTicks is the least churn phase of a run with faults.
	minChurnTicks = 200
)

// ChurnSpec is an algorithm under test with dynamic membership.
type ChurnSpec struct {
	// Spec is the algorithm. Its Factory is given each machine's
	// election.Config with Dynamic set, KeepLeader, the members the node
	// knows at start and the timing with the run's presence interval;
	// a factory of an algorithm with fixed voters adds its own.
	Spec
	// KeepLeader is given to every machine (election.Config.KeepLeader):
	// a member that joins follows the leader it finds, and the leader is
	// kept until it leaves.
	KeepLeader bool
	// Only makes members only join and leave (resign, crash or hang), one
	// at a time on a reliable network, the cluster settling after each:
	// no other fault. The leader is then known after every settle: the
	// highest running ID, or with KeepLeader the leader before unless it
	// left (then the highest running ID).
	Only bool
	// Voters runs Paxos with voters that change: the run draws a voter
	// set of 3 or 5 IDs, which are initial members, and gives it to every
	// machine (election.Config.Voters); the node that leads is asked now
	// and then to move the voters (paxos.Machine.ChangeVoters, through
	// Cluster.Do) to 1 to 5 IDs, most often among the running nodes.
	// Each settle first starts voters of the newest configuration a
	// running node holds until a quorum of it runs, and the cluster
	// agrees only once every running node holds one configuration, not
	// joint. The Factory's machines must implement ChangeVoters and
	// Voters as paxos.Machine does.
	Voters bool
}

// ChurnResult is the outcome of one churn run.
type ChurnResult struct {
	Result
	// Initial are the members at start (Result.Members too); Presence is
	// the run's presence interval, in ticks.
	Initial  []uint64
	Presence int
	// Joins counts the nodes that started with an ID that had never run;
	// Returns those that came back with their disk, Fresh those that came
	// back without it.
	Joins, Returns, Fresh int
	// Resigns, Crashes and Hangs count the departures by kind: a clean
	// Resign; a crash, its connection's end reported to the others
	// (Network.Events); a pause longer than the member time-out, after
	// which it resumes or crashes.
	Resigns, Crashes, Hangs int
	// Faults counts the crashes of the fault phase (restarted, or not,
	// with their disks), which are not departures.
	Faults int
	// Elections is how many elections the machines reported starting.
	Elections int
	// Reclaims is how many terms were claimed again by a node that came
	// back without its disk (Cluster.Reclaims).
	Reclaims int
	// Settles is how many times the cluster settled and was checked:
	// after the fault phase and after each join that follows; in a run
	// of Only, after the cold start and after each departure or join.
	Settles int
	// MostPresent is the most nodes that ran at once.
	MostPresent int
	// Voters is, in a run of ChurnSpec.Voters, the voter set at start.
	// Changes counts the changes of the voters a leader began (its
	// configuration became joint), Absent those of them whose new voters
	// did not all run, and Refused the requests the leader refused (a
	// change under way, or its lease lapsed). Begun and Completed count
	// the joint configurations and the new configurations, not joint,
	// that some node stored, one per version: a change that a leader
	// began and its successor completed counts once; Successors counts
	// those. Restored counts the voters the settles started for a quorum
	// of the newest configuration to run. Kept counts the members that
	// came back with their disk because without it too few voters of the
	// newest configuration would have kept theirs (among Returns).
	Voters                                       []uint64
	Changes, Absent, Refused                     int
	Begun, Completed, Successors, Restored, Kept int
}

// Departures is how many members left, of every kind.
func (r ChurnResult) Departures() int { return r.Resigns + r.Crashes + r.Hangs }

// ChurnBound is how many ticks after the last disturbance a churn run of
// spec with timing t agrees: first, within MaxFaultDelay, the fault
// phase's copies arrive or expire (none of a departed member comes
// later); within MemberTimeoutFactor+1 presence intervals more every
// departed member nobody was told of has timed out and every running one
// has said it is present, so that every node counts the running ones,
// at most MaxPresent; from there on the cluster converges as a cluster of
// MaxPresent members does (Bound, the rest of it), with the coordinator
// wait of MaxPresent members. The clocks run up to 5% slow.
func ChurnBound(spec Spec, t election.Timing) int {
	tc := t
	tc.CoordinatorTicks = churnCoordinator(t)
	return (Bound(spec, MaxPresent, tc) + (election.MemberTimeoutFactor+1)*t.PresenceTicks) * 21 / 20
}

// churnCoordinator is the longest coordinator wait of a churn run's
// machines once every node counts the running ones: at least
// (n+1)·T for the n members present (core.CoordinatorTicks).
func churnCoordinator(t election.Timing) int {
	return max(t.CoordinatorTicks, (MaxPresent+1)*t.AnswerTicks)
}

// churnRun is a run of RunChurn under way.
type churnRun struct {
	run
	spec    ChurnSpec
	res     *ChurnResult
	ids     []uint64 // every ID that may run: 1 to MaxChurnID
	timing  election.Timing
	fault   Network // the network of the fault phase
	f       faults
	join    float64         // the chance, each tick, that a member joins
	leave   float64         // the chance, each tick, that a member leaves
	ticks   int             // the churn phase, in a run with faults
	hold    int             // how long an agreement must hold
	startAt map[uint64]int  // initial members not started yet → their tick
	hangs   map[uint64]int  // hung nodes → the tick their hang ends
	crashed map[uint64]bool // nodes a fault crashed (not departed)
	split   bool
	// With ChurnSpec.Voters: change is the chance, each tick of the
	// fault phase, that the leader is asked to change the voters; votes
	// follows the configurations the nodes store; target is, in a run of
	// Only, the voters the last change asked for (nil before any).
	change float64
	votes  *voterLog
	target []uint64
	// leader is, in a run of Only with KeepLeader, the leader expected
	// after the next settle; 0 for the highest running ID.
	leader uint64
}

// RunChurn runs one churn run of spec: members with IDs from 1 to
// MaxChurnID (1 to MaxSmall of them at start, knowing each other) join
// (an ID that never ran, or one that ran before, with its disk or
// without) and leave (Resign; a crash, whose connection's end the others
// are told of with probability Network.Events; a hang, a pause longer
// than the member time-out, after which it resumes or crashes) at random,
// at most MaxPresent running at once, every machine configured with
// dynamic membership (election.Config.Dynamic, and KeepLeader as spec
// says). Unless spec.Only, the faults of RunSeed come on top for up to
// maxChurnTicks ticks (crashes and restarts, pauses, partitions, late,
// lost and duplicated copies; with leases, clocks within the drift
// bound); then the network settles: within ChurnBound every running node
// must agree on one leader, the highest running ID (with KeepLeader, any
// running node), and count exactly the running nodes as present
// (election.Membership), and keep doing so; then up to three members
// join one at a time, and after each the same must hold, with KeepLeader
// on the same leader, which alone may claim meanwhile. With spec.Only
// members only join and leave, one at a time on a reliable network, and
// after each the cluster must settle on the exact leader expected. With
// spec.Voters (Paxos), the leader is also asked at random to change the
// voters, each settle first starts voters of the newest configuration a
// running node holds until a quorum of it runs, and an agreement also
// needs every running node to hold one voter configuration, not joint.
// Every invariant of the cluster is checked after every step.
func RunChurn(seed uint64, spec ChurnSpec, trace io.Writer) ChurnResult {
	ch := &churnRun{spec: spec, res: &ChurnResult{Result: Result{Seed: seed, Converged: -1}}}
	ch.rng, ch.trace = rand.New(rand.NewPCG(seed, 0x636875726e)), trace
	if spec.Only {
		ch.res.Err = chain(ch.setup, ch.coldStart, ch.rounds)
	} else {
		ch.res.Err = chain(ch.setup, ch.churnPhase, ch.settle, ch.agree, ch.joinOnly)
	}
	ch.finish()
	return *ch.res
}

// finish counts what the machines did, once the cluster was built.
func (ch *churnRun) finish() {
	if ch.c != nil {
		ch.res.Elections, ch.res.Reclaims, ch.res.End = ch.c.Elections(), ch.c.Reclaims(), ch.c.Now()
	}
	if ch.votes != nil {
		ch.res.Begun, ch.res.Completed, ch.res.Successors = len(ch.votes.joint), len(ch.votes.done), ch.votes.successors()
	}
}

// setup draws the run's shape and builds its cluster, every node down.
func (ch *churnRun) setup() error {
	rng, res := ch.rng, ch.res
	for id := uint64(1); id <= MaxChurnID; id++ {
		ch.ids = append(ch.ids, id)
	}
	k := 1 + rng.IntN(MaxSmall)
	perm := rng.Perm(MaxChurnID)
	if ch.spec.Voters {
		// The voters are initial members: they start first.
		nv := 3 + 2*rng.IntN(2)
		for _, i := range perm[:nv] {
			res.Voters = append(res.Voters, uint64(i)+1)
		}
		slices.Sort(res.Voters)
		k = max(k, nv)
	}
	initial := make([]uint64, 0, k)
	for _, i := range perm[:k] {
		initial = append(initial, uint64(i)+1)
	}
	slices.Sort(initial)
	res.Initial, res.Members = initial, slices.Clone(initial)
	ch.timing = election.DefaultTiming(k)
	if ch.spec.Leases {
		ch.timing = election.DefaultLeaseTiming(k)
	}
	ch.timing.PresenceTicks = []int{25, 50, election.DefaultPresenceTicks}[rng.IntN(3)]
	res.Presence = ch.timing.PresenceTicks
	if ch.spec.Only {
		ch.fault = Quiet(TMax)
		ch.fault.Unreachable = []float64{0, 0.5, 1}[rng.IntN(3)]
		ch.fault.Events = []float64{0, 1}[rng.IntN(2)]
	} else {
		ch.fault, ch.f = drawFaults(rng, MaxPresent)
		ch.ticks = minChurnTicks + rng.IntN(maxChurnTicks-minChurnTicks)
	}
	ch.join = []float64{0.003, 0.01, 0.03}[rng.IntN(3)]
	ch.leave = []float64{0.003, 0.01, 0.03}[rng.IntN(3)]
	if ch.spec.Voters && !ch.spec.Only {
		ch.change = []float64{0.01, 0.05, 0.2}[rng.IntN(3)]
	}
	rates := make(map[uint64]int64)
	if ch.spec.Leases {
		// With leases, every clock runs at its own rate within the drift
		// bound, as in RunSeed; Bully's and the ring's waits (T) assume
		// clocks that run true.
		drift := int64(election.DefaultMaxDrift * ppm)
		for _, id := range ch.ids {
			rates[id] = ppm - drift + rng.Int64N(2*drift+1)
		}
	}
	res.Bound = ChurnBound(ch.spec.Spec, ch.timing)
	ch.hold = 2 * (ch.timing.LeaderTimeoutTicks + churnCoordinator(ch.timing))
	if ch.trace != nil {
		fmt.Fprintf(ch.trace, "seed %d: %s churn (keep leader %v, only %v), initial members %v, timing %+v, fault network %+v for %d ticks; faults %+v; joins %.3f and departures %.3f a tick; bound %d\n",
			res.Seed, ch.spec.Name, ch.spec.KeepLeader, ch.spec.Only, initial, ch.timing, ch.fault, ch.ticks, ch.f, ch.join, ch.leave, res.Bound)
		if ch.spec.Voters {
			fmt.Fprintf(ch.trace, "voters %v, changed %.3f a tick\n", res.Voters, ch.change)
		}
		traceRank(ch.trace, ch.spec.rank(res.Seed), ch.ids)
	}
	factory := ch.spec.Factory
	if ch.spec.Voters {
		voters := res.Voters
		factory = func(cfg election.Config) (election.Machine, error) {
			cfg.Voters = slices.Clone(voters)
			return ch.spec.Factory(cfg)
		}
	}
	c, err := New(Config{Members: ch.ids, Timing: ch.timing, Factory: factory, Leases: ch.spec.Leases, Rates: rates,
		Rand: rng, Network: ch.fault, Trace: ch.trace, Dynamic: true, Initial: initial, KeepLeader: ch.spec.KeepLeader,
		Rank: ch.spec.rank(res.Seed)})
	if err != nil {
		return err
	}
	ch.c = c
	if ch.spec.Voters {
		ch.votes = newVoterLog()
		c.checks = append(c.checks, ch.votes)
	}
	ch.startAt = make(map[uint64]int, k)
	for _, id := range initial {
		ch.startAt[id] = rng.IntN(ch.timing.LeaderTimeoutTicks)
	}
	ch.hangs, ch.crashed = map[uint64]int{}, map[uint64]bool{}
	return nil
}

// churnPhase runs the churn phase of a run with faults.
func (ch *churnRun) churnPhase() error { return ch.phase(ch.ticks, ch.disturb, nil) }

// disturb draws what happens before one tick of the churn phase: the
// initial members' starts, the ends of hangs, the faults, a join and a
// departure.
func (ch *churnRun) disturb() error {
	ch.startDue()
	ch.endHangs()
	if !ch.spec.Only {
		ch.faults()
	}
	if ch.rng.Float64() < ch.join {
		ch.joinOne()
	}
	if ch.rng.Float64() < ch.leave {
		ch.leaveOne()
	}
	if ch.change > 0 && ch.rng.Float64() < ch.change {
		ch.changeVoters()
	}
	return nil
}

// startDue starts the initial members whose start is due.
func (ch *churnRun) startDue() {
	for _, id := range ch.ids {
		if at, ok := ch.startAt[id]; ok && at <= ch.c.Now() {
			delete(ch.startAt, id)
			ch.start(id)
		}
	}
}

// start starts node id and counts how many run.
func (ch *churnRun) start(id uint64) {
	ch.c.Start(id)
	ch.res.MostPresent = max(ch.res.MostPresent, ch.running())
}

// running is how many nodes run.
func (ch *churnRun) running() int { return len(ch.c.Running()) }

// endHangs ends the hangs that are due.
func (ch *churnRun) endHangs() {
	for _, id := range ch.ids {
		if end, ok := ch.hangs[id]; ok && ch.c.Now() >= end {
			ch.endHang(id)
		}
	}
}

// endHang ends the hang of node id: it resumes or crashes. It resumes as
// the runtime's loop does after a stall: a node that does not lead
// withholds the deadlines it reached late and first handles what waits
// for it (ResumeSettling); a leader gets its ticks first (Resume).
func (ch *churnRun) endHang(id uint64) {
	delete(ch.hangs, id)
	if ch.rng.IntN(3) == 0 {
		ch.c.Crash(id)
		return
	}
	ch.c.ResumeSettling(id)
}

// faults draws the faults of one tick of the fault phase, as RunSeed's:
// nodes pause and resume, crash and restart with their disks, and the
// network is split and healed. A hung node is left to its hang.
func (ch *churnRun) faults() {
	c, rng, f := ch.c, ch.rng, ch.f
	for _, id := range ch.ids {
		if _, hung := ch.hangs[id]; hung {
			continue
		}
		switch {
		case c.Paused(id):
			if rng.Float64() < f.resume {
				if rng.IntN(2) == 0 {
					c.Resume(id)
				} else {
					c.ResumeSettling(id)
				}
			}
		case c.Up(id) && rng.Float64() < f.crash:
			c.Crash(id)
			ch.crashed[id] = true
			ch.res.Faults++
		case c.Up(id) && rng.Float64() < f.pause:
			c.Pause(id)
		case ch.crashed[id] && !c.Up(id) && rng.Float64() < f.restart && ch.running() < MaxPresent:
			delete(ch.crashed, id)
			ch.start(id)
		}
	}
	switch {
	case ch.split && rng.Float64() < f.heal:
		c.Heal()
		ch.split = false
	case !ch.split && rng.Float64() < f.partition:
		c.Partition(randomGroups(rng, ch.ids)...)
		ch.split = true
	}
}

// joinOne starts a node that does not run, if fewer than MaxPresent do:
// an ID that never ran, or one that ran before, with its disk or without
// (a new container). It returns the ID, or 0.
func (ch *churnRun) joinOne() uint64 {
	if ch.running() >= MaxPresent {
		return 0
	}
	var fresh, back []uint64
	for _, id := range ch.ids {
		_, pending := ch.startAt[id]
		switch {
		case ch.c.Up(id) || pending:
		case ch.c.ran(id):
			back = append(back, id)
		default:
			fresh = append(fresh, id)
		}
	}
	var id uint64
	switch {
	case len(fresh) == 0 && len(back) == 0:
		return 0
	case len(back) == 0 || len(fresh) > 0 && ch.rng.IntN(2) == 0:
		id = fresh[ch.rng.IntN(len(fresh))]
		ch.res.Joins++
		ch.logf("%d joins", id)
	default:
		id = back[ch.rng.IntN(len(back))]
		delete(ch.crashed, id)
		switch wipe := ch.rng.IntN(2) == 0; {
		case wipe && ch.spec.Voters && !ch.mayWipe(id):
			ch.res.Returns++
			ch.res.Kept++
			ch.logf("%d comes back with its disk: without it, too few voters of the newest configuration would keep it", id)
		case wipe:
			ch.c.WipeDisk(id)
			ch.res.Fresh++
			ch.logf("%d comes back without its disk", id)
		default:
			ch.res.Returns++
			ch.logf("%d comes back with its disk", id)
		}
	}
	ch.start(id)
	return id
}

// The kinds of departure.
const (
	resigns = iota
	crashes
	hangs
)

// leaveOne makes a running node that is not paused leave: it resigns,
// crashes, or hangs for longer than the member time-out. It returns the
// node and the kind of departure, or 0.
func (ch *churnRun) leaveOne() (uint64, int) {
	var can []uint64
	for _, id := range ch.c.Running() {
		if !ch.c.Paused(id) {
			can = append(can, id)
		}
	}
	if len(can) == 0 {
		return 0, 0
	}
	id := can[ch.rng.IntN(len(can))]
	kind := ch.rng.IntN(3)
	switch kind {
	case resigns:
		ch.res.Resigns++
		ch.c.Resign(id)
	case crashes:
		ch.res.Crashes++
		ch.c.Crash(id)
	default:
		ch.res.Hangs++
		p := ch.timing.PresenceTicks
		ch.hangs[id] = ch.c.Now() + election.MemberTimeoutFactor*p*21/20 + 1 + ch.rng.IntN(p)
		ch.logf("%d hangs until tick %d", id, ch.hangs[id])
		ch.c.Pause(id)
	}
	return id, kind
}

// settle ends the fault phase: the network heals and becomes reliable,
// hangs end, paused nodes resume, initial members that never started
// start, each node a fault crashed restarts or stays down, and at least
// one node runs.
func (ch *churnRun) settle() error {
	ch.logf("the network settles")
	if err := ch.settleNetwork(ch.fault); err != nil {
		return err
	}
	ch.split = false
	for _, id := range ch.ids {
		if _, hung := ch.hangs[id]; hung {
			ch.endHang(id)
		} else {
			ch.c.Resume(id)
		}
		if _, pending := ch.startAt[id]; pending {
			delete(ch.startAt, id)
			if ch.running() < MaxPresent {
				ch.start(id)
			}
		}
		if ch.crashed[id] {
			delete(ch.crashed, id)
			if ch.rng.IntN(2) == 0 && ch.running() < MaxPresent {
				ch.start(id)
			}
		}
	}
	if ch.running() == 0 {
		ch.joinOne()
	}
	if ch.spec.Voters {
		ch.restoreVoters()
	}
	ch.res.QuietAt = ch.c.Now()
	ch.logf("settled: must agree by tick %d", ch.c.Now()+ch.res.Bound)
	return nil
}

// agree waits for the agreement once the network settled, and checks
// that it holds for the rest of the bound and beyond.
func (ch *churnRun) agree() error {
	from := ch.res.QuietAt
	converged, err := ch.await(goal{from: from, bound: ch.res.Bound, end: from + ch.res.Bound + ch.hold,
		agreed: ch.agreed, missing: ch.missing(), after: "the network settled"})
	if err != nil {
		return ch.explain(err)
	}
	ch.res.Converged = converged
	ch.res.Settles++
	_, term, _ := ch.c.Leading()
	return ch.termKept(term)
}

// joinOnly lets up to three members join, one at a time, on the settled
// network: after each the cluster must settle again, and with KeepLeader
// on the same leader, which alone may claim meanwhile (a new term above
// one the member that joined brought from its disk).
func (ch *churnRun) joinOnly() error {
	for range ch.rng.IntN(4) {
		leader, term, _ := ch.c.Leading()
		claims := ch.c.Claims()
		id := ch.joinOne()
		if id == 0 {
			return nil
		}
		if ch.spec.Voters {
			ch.restoreVoters() // it may bring a newer configuration
		}
		a := goal{from: ch.c.Now(), bound: ch.res.Bound, end: ch.c.Now() + ch.res.Bound + ch.hold, hold: ch.hold,
			agreed: ch.agreed, missing: ch.missing(), after: fmt.Sprintf("%d joined", id)}
		if ch.spec.KeepLeader {
			a.agreed = func() bool {
				l, _, ok := ch.c.Leading()
				return ok && l == leader && ch.membersAgree() && ch.votersSettled()
			}
			a.check = func() error {
				for claims < ch.c.Claims() {
					claims = ch.c.Claims()
					// The kept leader may claim again, above a term the
					// member that joined brought; no other node may claim.
					if by := ch.c.claims[ch.c.announced]; by != leader {
						return fmt.Errorf("%w: keeping the leader, %d claimed term %d after %d joined: the leader was %d with term %d: %s",
							ErrInvariant, by, ch.c.announced, id, leader, term, ch.c.describe())
					}
				}
				return nil
			}
			a.missing = fmt.Sprintf("no agreement on the leader kept, %d, and the members present%s,", leader, ch.andVoters())
		}
		if _, err := ch.await(a); err != nil {
			return ch.explain(err)
		}
		ch.res.Settles++
	}
	return nil
}

// coldStart starts the initial members (a run of Only) at their ticks
// and waits for the first agreement.
func (ch *churnRun) coldStart() error {
	last := 0
	for _, at := range ch.startAt {
		last = max(last, at)
	}
	if err := ch.phase(last+1, func() error { ch.startDue(); return nil }, nil); err != nil {
		return err
	}
	ch.res.QuietAt = ch.c.Now()
	return ch.settled("the cold start")
}

// rounds makes members join and leave one at a time (a run of Only),
// the cluster settling on the leader expected after each.
func (ch *churnRun) rounds() error {
	for range 8 + ch.rng.IntN(9) {
		what, err := ch.event()
		if err != nil {
			return err
		}
		if ch.spec.Voters {
			ch.restoreVoters()
		}
		if err := ch.settled(what); err != nil {
			return err
		}
	}
	return nil
}

// event makes one member join or leave (a hang lasts its time and ends
// before it returns) and notes the leader then expected. It says what it
// did.
func (ch *churnRun) event() (string, error) {
	if ch.spec.Voters && ch.rng.IntN(4) == 0 {
		if next := ch.changeVoters(); next != nil {
			ch.target = next
			return fmt.Sprintf("the voters moved to %v", next), nil
		}
	}
	n := ch.running()
	if n < MaxPresent && (n <= 1 || ch.rng.IntN(2) == 0) {
		if id := ch.joinOne(); id != 0 {
			return fmt.Sprintf("%d joined", id), nil
		}
	}
	id, kind := ch.leaveOne()
	if id == 0 {
		return "nothing", nil
	}
	if id == ch.leader {
		ch.leader = 0 // the highest running ID leads next
	}
	if kind != hangs {
		return fmt.Sprintf("%d left (%s)", id, []string{"resigned", "crashed"}[kind]), nil
	}
	if err := ch.phase(ch.hangs[id], nil, nil); err != nil {
		return "", err
	}
	if ch.spec.KeepLeader && ch.leader == 0 {
		// Its successor is elected while it hangs: the highest of the
		// others, kept when it comes back.
		ch.leader = ch.highestBut(id)
	}
	ch.endHang(id)
	return fmt.Sprintf("%d hung and came back or crashed", id), nil
}

// highestBut is the highest-ranked running node but id (the highest
// running ID, ranked by ID), or 0.
func (ch *churnRun) highestBut(id uint64) uint64 {
	return ch.c.Highest(slices.DeleteFunc(ch.c.Running(), func(o uint64) bool { return o == id }))
}

// settled waits, in a run of Only, for the cluster to settle after what
// happened: the leader expected and the members present, held for
// ch.hold ticks, within the bound.
func (ch *churnRun) settled(after string) error {
	from := ch.c.Now()
	want := func() uint64 {
		running := ch.c.Running()
		if ch.spec.KeepLeader && ch.leader != 0 {
			return ch.leader
		}
		return ch.c.Highest(running)
	}
	first := ch.spec.KeepLeader && ch.res.Settles == 0 // any leader at the cold start
	a := goal{from: from, bound: ch.res.Bound, end: from + ch.res.Bound + ch.hold, hold: ch.hold,
		agreed: func() bool {
			l, _, ok := ch.c.Leading()
			return ok && (first || l == want()) && ch.membersAgree() && ch.votersSettled()
		},
		missing: fmt.Sprintf("no agreement on leader %d and the members present%s,", want(), ch.andVoters()), after: after}
	if first {
		a.missing = fmt.Sprintf("no agreement on a leader and the members present%s,", ch.andVoters())
	}
	converged, err := ch.await(a)
	if err != nil {
		return ch.explain(err)
	}
	ch.res.Converged = max(ch.res.Converged, converged)
	ch.res.Settles++
	if ch.spec.KeepLeader {
		ch.leader, _, _ = ch.c.Leading()
	}
	return nil
}

// agreed reports whether the cluster agrees after the churn: on the
// highest running ID (with KeepLeader, on any leader), every running node
// counting exactly the running ones as present.
func (ch *churnRun) agreed() bool {
	var ok bool
	if ch.spec.KeepLeader {
		_, _, ok = ch.c.Leading()
	} else {
		_, _, ok = ch.c.Agreement()
	}
	return ok && ch.membersAgree() && ch.votersSettled()
}

// votersSettled reports whether, in a run of ChurnSpec.Voters, every
// running node holds one voter configuration, not joint (votersAgree);
// true in other runs.
func (ch *churnRun) votersSettled() bool { return !ch.spec.Voters || ch.votersAgree() }

// andVoters names the voters in what an agreement misses, in a run of
// ChurnSpec.Voters.
func (ch *churnRun) andVoters() string {
	switch {
	case !ch.spec.Voters:
		return ""
	case ch.target != nil:
		return fmt.Sprintf(" and the voters %v, not joint", ch.target)
	}
	return " and one voter configuration, not joint"
}

// missing is what agreed misses, for a liveness violation.
func (ch *churnRun) missing() string {
	if ch.spec.KeepLeader {
		return fmt.Sprintf("no agreement on a leader and the members present%s,", ch.andVoters())
	}
	return fmt.Sprintf("no agreement on the highest running %s and the members present%s,", ch.c.highestName(), ch.andVoters())
}

// membersAgree reports whether every running node whose machine tells
// its members (election.Membership) counts exactly the running nodes.
func (ch *churnRun) membersAgree() bool {
	running := ch.c.Running()
	for _, id := range running {
		if m, ok := ch.c.MembersOf(id); ok && !slices.Equal(m, running) {
			return false
		}
	}
	return true
}

// explain adds the members each running node counts to a liveness
// violation.
func (ch *churnRun) explain(err error) error {
	var b strings.Builder
	for _, id := range ch.c.Running() {
		if m, ok := ch.c.MembersOf(id); ok {
			fmt.Fprintf(&b, " [%d: %v]", id, m)
		}
	}
	if ch.spec.Voters {
		return fmt.Errorf("%w; running %v, members counted:%s; voters held:%s", err, ch.c.Running(), b.String(), ch.describeVoters())
	}
	return fmt.Errorf("%w; running %v, members counted:%s", err, ch.c.Running(), b.String())
}
