package sim

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// The shape of a byzantine churn run.
const (
	// BzChurnPool bounds the IDs of a byzantine churn run: its members
	// are drawn from 1 to BzChurnPool.
	BzChurnPool = 9
	// bzMadeUp is how many IDs above the pool the traitor makes up to
	// add to the member set; they never run.
	bzMadeUp = 2
	// BzMinMembers is the fewest members a removal leaves
	// (byzantine.DefaultMinMembers): four members tolerate one liar, so
	// with at most one traitor, f ≥ 1 in every set.
	BzMinMembers = 4
	// minBzChurnTicks and maxBzChurnTicks bound the disturbed phase.
	minBzChurnTicks = 300
	maxBzChurnTicks = 1000
	// forgedKeyBase offsets the IDs whose MemberKeys are the keys of the
	// traitor's making: no member's key is one of them.
	forgedKeyBase = 1000
)

// Changes is what the machine of a member whose member set changes is
// given (byzantine.Changes): Admit checks a credential of the cluster's
// authority; Key and Cred are the member's own public key and
// credential, which it asks to join with while it is not in the set;
// MinMembers is the fewest members a removal leaves.
type Changes struct {
	Admit      func(id uint64, key, cred string) error
	Key, Cred  string
	MinMembers int
}

// ChangingFactory builds the machine of a member of an algorithm with
// keys whose member set changes: cfg.Members are the configured set
// (version 0) and keys their public keys, signer signs as cfg.ID, which
// may be outside the configured set.
type ChangingFactory func(cfg election.Config, cluster string, signer certify.Signer, keys *certify.Keys, ch Changes) (election.Machine, error)

// ByzantineChurnSpec is an algorithm that elects certified leaders among
// traitors and changes its member set by certified decisions (byzantine
// with Changes). Its machines implement Certified and MemberSets.
type ByzantineChurnSpec struct {
	Name    string
	Factory ChangingFactory
	// PenaltyFactor is byzantine.PenaltyFactor (see ByzantineSpec).
	PenaltyFactor int
	// Spread ranks the members by election.Spread (see
	// ByzantineSpec.Spread).
	Spread bool
}

// rank is the rank of the run of seed.
func (s ByzantineChurnSpec) rank(seed uint64) election.Rank {
	return ByzantineSpec{Spread: s.Spread}.rank(seed)
}

// ChangeRound is what one change of the member set still due may cost
// once messages arrive in time: the leader learns of it (a member that
// asks to join says so every leader time-out, on a clock up to 5% slow;
// a departure is told at once, or else the member counts as gone once
// silent for the member time-out, which ByzantineChurnBound allows for
// once), proposes it, gathers a quorum's accepts and the commits follow
// (four delays); then, as a member uses a set from the next term it
// enters and a leader proposes a change only in a term of the latest
// set, a new term, one round R (ByzantineRound). Both parts fit within R
// each: 2·R.
func ChangeRound(t election.Timing) int { return 2 * ByzantineRound(t) }

// ByzantineChurnBound is how many ticks after the traitor falls silent,
// with due changes of the member set still to make, every running honest
// member holds the same latest set, which holds them all and none that is
// away (unless it is down to BzMinMembers), and the highest of them
// leads: the hand-over of HighestBound among as many members as the pool
// holds, a ChangeRound per change due, and a member time-out for a
// silent member to count as gone, (MemberTimeoutFactor+1)·PresenceTicks
// on a clock up to 5% slow.
func ByzantineChurnBound(spec ByzantineChurnSpec, t election.Timing, due int) int {
	return HighestBound(ByzantineSpec{PenaltyFactor: spec.PenaltyFactor}, BzChurnPool, t) + due*ChangeRound(t) +
		(election.MemberTimeoutFactor+1)*t.PresenceTicks*21/20
}

// ByzantineChurnResult is the outcome of one byzantine churn run.
type ByzantineChurnResult struct {
	Result
	// Configured is the member set at start, version 0 (Result.Members
	// too); Traitor the member that lies, 0 for none.
	Configured []uint64
	Traitor    uint64
	// SettleAt is the tick from which messages arrive in time; Elected
	// how many ticks after it a leader was first certified (-1 if not),
	// within ElectBound.
	SettleAt, Elected, ElectBound int
	// Joins counts the members of the pool outside the configured set
	// that started; Leaves the members that resigned, Crashes those that
	// crashed with their connection's end reported (departures both);
	// Returns the departed members that came back with their disk;
	// Faults the crashes of the fault phase, each restarted or not.
	Joins, Leaves, Crashes, Returns, Faults int
	// Versions is the highest version of the member set an honest member
	// adopted: how many changes were made, Adds of them adding a member
	// and Removes removing one. Final is the latest set every running
	// member held at the end, if they held one.
	Versions      uint64
	Adds, Removes int
	Final         []uint64
	// Away are the honest members that ran and were down at the end.
	Away []uint64
	// Due is how many changes of the member set were counted due when the
	// traitor fell silent (ByzantineChurnBound).
	Due int
	// Told is how many departures the settled run told running members
	// of (members of their latest set that were away).
	Told int
	// Lies is how many copies the traitor sent, SetLies of them lies
	// about the member set; Convictions how many times an honest member
	// found it out.
	Lies, SetLies, Convictions int
}

// Departures is how many members left: resigned or crashed for good.
func (r ByzantineChurnResult) Departures() int { return r.Leaves + r.Crashes }

// RunByzantineChurn runs one byzantine churn run of spec: members drawn
// from 1 to BzChurnPool, 4 to 6 of them the configured set (version 0),
// at most one of those a traitor (a Traitor whose shadow's member set
// changes, lying about the member set besides: setLiar). The others
// start later and ask to join with the credential the cluster's
// authority issued them. Every member says it is present each presence
// interval (25, 50 or 100 ticks, drawn per seed); one silent for
// MemberTimeoutFactor of them counts as gone. For 300 to 1000 ticks the
// faults of RunByzantine (crashes and restarts from the disk, pauses,
// partitions, late, lost and duplicated copies, clocks within the drift
// bound) come with churn: members of the pool start and ask to join;
// honest members leave, by a Resign or a crash whose connection's end is
// reported to the others; departed members come back with their disk and
// ask to join again. Then the network settles: paused nodes resume,
// crashed and departed nodes come back or stay away at random, then away
// ones come back until every set one change from the newest adopted has
// a quorum of running honest members; a running member is told of the
// members of its latest set that are away (what it missed while down,
// paused or cut off). The traitor lies on until a leader is certified
// (within ElectBound) and a little after, then falls silent: within
// ByzantineChurnBound every running honest member must hold the same
// latest set, holding every one of them and none that is away (unless
// the set is down to BzMinMembers), the highest of them must lead, and
// both must hold to the end. Every invariant of the cluster, with
// leases, and those of setChecker are checked after every step. The
// first violation, of safety or of liveness, is the result's Err.
func RunByzantineChurn(seed uint64, spec ByzantineChurnSpec, trace io.Writer) ByzantineChurnResult {
	b := &bzChurnRun{spec: spec, res: &ByzantineChurnResult{Result: Result{Seed: seed, Converged: -1}, Elected: -1}}
	b.rng, b.trace = rand.New(rand.NewPCG(seed, 0x627a636875726e)), trace
	b.res.Err = chain(b.setup, b.traitorStarts, b.churnPhase, b.settle, b.elect, b.silence, b.agree)
	b.finish()
	return *b.res
}

// bzChurnRun is a run of RunByzantineChurn under way.
type bzChurnRun struct {
	run
	spec    ByzantineChurnSpec
	res     *ByzantineChurnResult
	timing  election.Timing
	faulty  Network // the network of the fault phase
	f       faults
	ticks   int     // the disturbed phase
	join    float64 // the chances, each tick, that a member joins,
	leave   float64 // that one leaves,
	back    float64 // and that one comes back
	pool    []uint64
	all     []uint64 // the pool and the made-up IDs
	honest  []uint64 // the pool but the traitor
	traitor uint64
	keys    *certify.Keys // every ID's
	signers map[uint64]certify.Signer
	factory Factory
	auth    *authority
	sets    *setChecker
	liar    *setLiar
	lying   bool
	settled bool
	startAt map[uint64]int  // configured members not started yet → their tick
	left    map[uint64]bool // departed and not back
	crashed map[uint64]bool // crashed by a fault, not restarted
	split   bool
	told    map[toldKey]bool
}

// toldKey is a departure told to a node: to which incarnation of it, of
// which member, in which version of its latest set.
type toldKey struct {
	node        uint64
	incarnation int
	member      uint64
	version     uint64
}

// setup draws the run's shape and builds its cluster, every node down.
func (b *bzChurnRun) setup() error {
	rng, res := b.rng, b.res
	for id := uint64(1); id <= BzChurnPool+bzMadeUp; id++ {
		b.all = append(b.all, id)
		if id <= BzChurnPool {
			b.pool = append(b.pool, id)
		}
	}
	n := BzMinMembers + rng.IntN(3)
	var configured []uint64
	for _, i := range rng.Perm(BzChurnPool)[:n] {
		configured = append(configured, uint64(i)+1)
	}
	slices.Sort(configured)
	if rng.IntN(4) != 0 {
		b.traitor = configured[rng.IntN(n)]
		if rng.IntN(3) == 0 {
			b.traitor = b.spec.rank(res.Seed).Highest(configured) // the highest member lies
		}
	}
	for _, id := range b.pool {
		if id != b.traitor {
			b.honest = append(b.honest, id)
		}
	}
	b.timing = election.DefaultLeaseTiming(BzChurnPool)
	// Every member says it is present each presence interval; one silent
	// for MemberTimeoutFactor of them counts as gone.
	b.timing.PresenceTicks = []int{25, 50, election.DefaultPresenceTicks}[rng.IntN(3)]
	b.faulty, b.f = drawFaults(rng, BzChurnPool)
	drift := int64(election.DefaultMaxDrift * ppm)
	rates := make(map[uint64]int64)
	for _, id := range b.pool {
		rates[id] = ppm - drift + rng.Int64N(2*drift+1)
	}
	b.ticks = minBzChurnTicks + rng.IntN(maxBzChurnTicks-minBzChurnTicks)
	b.join = []float64{0.005, 0.01, 0.02}[rng.IntN(3)]
	b.leave = []float64{0.003, 0.006, 0.012}[rng.IntN(3)]
	b.back = []float64{0.002, 0.005, 0.01}[rng.IntN(3)]
	res.Members, res.Configured, res.Traitor = slices.Clone(configured), configured, b.traitor
	res.ElectBound = ElectBound(BzChurnPool, b.timing)
	if b.trace != nil {
		fmt.Fprintf(b.trace, "seed %d: %s churn, pool 1..%d, configured %v, traitor %d, timing %+v, fault network %+v for %d ticks; faults %+v; joins %.3f, departures %.3f and returns %.3f a tick; clock rates %v; bound %d to elect\n",
			res.Seed, b.spec.Name, BzChurnPool, configured, b.traitor, b.timing, b.faulty, b.ticks, b.f, b.join, b.leave, b.back, rates, res.ElectBound)
		traceRank(b.trace, b.spec.rank(res.Seed), b.all)
	}
	var err error
	if b.keys, b.signers, err = MemberKeys(b.all); err != nil {
		return err
	}
	genesis, _, err := MemberKeys(configured)
	if err != nil {
		return err
	}
	set, err := certify.NewMemberSet(0, genesis)
	if err != nil {
		return err
	}
	b.auth = newAuthority(ByzantineCluster, b.pool, b.keys)
	b.factory = func(cfg election.Config) (election.Machine, error) {
		cfg.Members = slices.Clone(configured)
		key, _ := b.keys.PublicKey(cfg.ID)
		return b.spec.Factory(cfg, ByzantineCluster, b.signers[cfg.ID], genesis,
			Changes{Admit: b.auth.admit, Key: key, Cred: b.auth.credential(cfg.ID), MinMembers: BzMinMembers})
	}
	var traitors []uint64
	if b.traitor != 0 {
		traitors = []uint64{b.traitor}
	}
	b.c, err = New(Config{Members: b.all, Timing: b.timing, Factory: b.factory, Leases: true, Rates: rates, Rand: rng,
		Network: b.faulty, Trace: b.trace, Traitors: traitors, Rank: b.spec.rank(res.Seed)})
	if err != nil {
		return err
	}
	if b.sets, err = newSetChecker(b.c, ByzantineCluster, set, b.auth.issued, BzMinMembers); err != nil {
		return err
	}
	b.c.checks = append(b.c.checks, b.sets)
	b.startAt = map[uint64]int{}
	for _, id := range configured {
		if id != b.traitor {
			b.startAt[id] = rng.IntN(b.timing.LeaderTimeoutTicks)
		}
	}
	b.left, b.crashed, b.told = map[uint64]bool{}, map[uint64]bool{}, map[toldKey]bool{}
	b.before = b.beforeTick
	return nil
}

// traitorStarts makes the traitor, if the run has one: it runs an honest
// machine of its own whose member set changes, hears what reaches it,
// and lies before every tick from now on.
func (b *bzChurnRun) traitorStarts() error {
	if b.traitor == 0 {
		return nil
	}
	m, err := b.factory(election.Config{ID: b.traitor, Timing: b.timing, Incarnation: 1, Rank: b.c.Rank()})
	if err != nil {
		return err
	}
	shadow, ok := m.(MemberSets)
	if !ok {
		return fmt.Errorf("sim: the machines of %s do not tell their member sets", b.spec.Name)
	}
	owned := make([]uint64, len(b.all))
	for i, id := range b.all {
		owned[i] = forgedKeyBase + id
	}
	forgedKeys, _, err := MemberKeys(owned)
	if err != nil {
		return err
	}
	keys, forged := map[uint64]string{}, map[uint64]string{}
	for _, id := range b.all {
		if id <= BzChurnPool {
			keys[id], _ = b.keys.PublicKey(id)
		}
		forged[id], _ = forgedKeys.PublicKey(forgedKeyBase + id)
	}
	b.liar = &setLiar{
		Traitor: NewTraitor(TraitorConfig{ID: b.traitor, Signer: b.signers[b.traitor], Cluster: ByzantineCluster, Members: b.all, Rank: b.c.Rank(),
			Accomplices: []uint64{b.traitor}, Shadow: m, Rand: b.rng,
			Current: func() []uint64 { _, term := shadow.MemberSet(); return term.IDs() }}),
		shadow: shadow, cluster: ByzantineCluster, signer: b.signers[b.traitor], rng: b.rng,
		keys: keys, forged: forged, pool: b.pool, madeUp: b.all[BzChurnPool:], running: b.c.Running,
	}
	b.c.Tap(func(to uint64, m protocol.Message) {
		if to == b.traitor {
			b.liar.Receive(m)
		}
	})
	b.lying = true
	return nil
}

// beforeTick runs before every tick: once settled, the departures told;
// while the traitor lies, its lies of the tick.
func (b *bzChurnRun) beforeTick() error {
	if b.settled {
		b.tellAway()
	}
	if !b.lying {
		return nil
	}
	for _, lie := range b.liar.Tick() {
		var err error
		if lie.To == 0 {
			err = b.c.Inject(lie.Message)
		} else {
			err = b.c.InjectTo(lie.Message, lie.To)
		}
		if err != nil {
			return err
		}
		b.res.Lies++
	}
	return nil
}

// churnPhase runs the disturbed phase: the configured honest members
// start within the first leader time-out; the faults and the churn come
// before every tick.
func (b *bzChurnRun) churnPhase() error { return b.phase(b.ticks, b.disturb, nil) }

// disturb draws what happens before one tick of the disturbed phase: the
// configured members' starts, the faults, a join, a departure and a
// return.
func (b *bzChurnRun) disturb() error {
	for _, id := range b.honest {
		if at, ok := b.startAt[id]; ok && at <= b.c.Now() {
			delete(b.startAt, id)
			b.c.Start(id)
		}
	}
	b.faults()
	if b.rng.Float64() < b.join {
		b.joinOne()
	}
	if b.rng.Float64() < b.leave {
		b.leaveOne()
	}
	if b.rng.Float64() < b.back {
		b.returnOne()
	}
	return nil
}

// faults draws the faults of one tick, as RunByzantine's: honest nodes
// pause and resume, crash (their end reported to the others as
// Network.Events says) and restart with their disks, all of them crash
// and restart at once now and then, and the network is split and healed.
// A departed member is left to the churn.
func (b *bzChurnRun) faults() {
	c, rng, f := b.c, b.rng, b.f
	if rng.Float64() < f.wholeRestart {
		running := c.Running()
		for _, id := range running {
			c.Crash(id)
		}
		for _, id := range running {
			c.Start(id)
		}
	}
	for _, id := range b.honest {
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
			b.crashed[id] = true
			b.res.Faults++
		case c.Up(id) && rng.Float64() < f.pause:
			c.Pause(id)
		case b.crashed[id] && rng.Float64() < f.restart:
			delete(b.crashed, id)
			c.Start(id)
		}
	}
	switch {
	case b.split && rng.Float64() < f.heal:
		c.Heal()
		b.split = false
	case !b.split && rng.Float64() < f.partition:
		c.Partition(randomGroups(rng, b.pool)...)
		b.split = true
	}
}

// joinOne starts an honest member of the pool that never ran and is not
// of the configured set: it asks to join.
func (b *bzChurnRun) joinOne() {
	var can []uint64
	for _, id := range b.honest {
		if _, pending := b.startAt[id]; !pending && !b.c.ran(id) && !slices.Contains(b.res.Configured, id) {
			can = append(can, id)
		}
	}
	if len(can) == 0 {
		return
	}
	id := can[b.rng.IntN(len(can))]
	b.res.Joins++
	b.logf("%d joins", id)
	b.c.Start(id)
}

// leaveOne makes a running honest node that is not paused leave: it
// resigns, or crashes with its connection's end reported to every running
// node on its side.
func (b *bzChurnRun) leaveOne() {
	var can []uint64
	for _, id := range b.c.Running() {
		if !b.c.Paused(id) {
			can = append(can, id)
		}
	}
	if len(can) == 0 {
		return
	}
	id := can[b.rng.IntN(len(can))]
	b.left[id] = true
	if b.rng.IntN(2) == 0 {
		b.res.Leaves++
		b.logf("%d leaves", id)
		b.c.Resign(id)
		return
	}
	b.res.Crashes++
	b.logf("%d leaves: it crashes, its end reported", id)
	b.depart(id)
}

// depart crashes node id, its connection's end reported to every running
// node on its side (as with Network.Events 1).
func (b *bzChurnRun) depart(id uint64) {
	events := b.c.net.Events
	b.c.net.Events = 1
	b.c.Crash(id)
	b.c.net.Events = events
}

// returnOne has a departed member come back with its disk.
func (b *bzChurnRun) returnOne() {
	var can []uint64
	for _, id := range b.honest {
		if b.left[id] {
			can = append(can, id)
		}
	}
	if len(can) > 0 {
		b.comeBack(can[b.rng.IntN(len(can))])
	}
}

// comeBack starts departed member id again, with its disk.
func (b *bzChurnRun) comeBack(id uint64) {
	delete(b.left, id)
	b.res.Returns++
	b.logf("%d comes back with its disk", id)
	b.c.Start(id)
}

// settle has the network settle (healed, reliable, delays within TMax)
// and ends the churn: paused nodes resume, configured members that never
// started start, each crashed node restarts and each departed one comes
// back, or stays away, at random; then away members come back, in a
// random order, until the changes due can be made (live). From now on
// running members are told of the members of their latest set that are
// away (tellAway).
func (b *bzChurnRun) settle() error {
	b.logf("the network settles")
	if err := b.settleNetwork(b.faulty); err != nil {
		return err
	}
	b.split = false
	for _, id := range b.honest {
		b.c.Resume(id)
		if _, pending := b.startAt[id]; pending {
			delete(b.startAt, id)
			b.c.Start(id)
		}
	}
	var away []uint64
	for _, id := range b.honest {
		switch {
		case b.crashed[id] && b.rng.IntN(2) == 0:
			delete(b.crashed, id)
			b.c.Start(id)
		case b.left[id] && b.rng.IntN(4) == 0:
			b.comeBack(id)
		case b.crashed[id] || b.left[id]:
			away = append(away, id)
		}
	}
	for _, i := range b.rng.Perm(len(away)) {
		if b.live() {
			break
		}
		id := away[i]
		if b.crashed[id] {
			delete(b.crashed, id)
			b.logf("%d restarts: without it, a set one change from the newest would lack a quorum", id)
			b.c.Start(id)
		} else {
			b.logf("%d must come back: without it, a set one change from the newest would lack a quorum", id)
			b.comeBack(id)
		}
	}
	b.settled = true
	b.res.SettleAt = b.c.Now()
	b.logf("settled: newest member set version %d %v, running %v; a leader must be certified by tick %d",
		b.sets.versions(), b.sets.newest().IDs(), b.c.Running(), b.c.Now()+b.res.ElectBound)
	return nil
}

// live reports whether the changes due after the settle can be made,
// one after the other: the newest set an honest member adopted, and
// every set one change from it (a change in flight: a member that ran
// added, a member removed), holds a quorum of running honest members.
// From there each change adds a running member or removes one that is
// away, and either keeps a quorum running: with h running of n,
// h ≥ Quorum(n) implies h+1 ≥ Quorum(n+1) and h ≥ Quorum(n−1). The
// traitor counts as down: it falls silent.
func (b *bzChurnRun) live() bool {
	running := b.c.Running()
	quorate := func(set []uint64) bool {
		up := 0
		for _, id := range set {
			if _, ok := slices.BinarySearch(running, id); ok {
				up++
			}
		}
		return up >= certify.Quorum(len(set))
	}
	newest := b.sets.newest().IDs()
	if !quorate(newest) {
		return false
	}
	for _, id := range b.pool {
		i, in := slices.BinarySearch(newest, id)
		switch {
		case in && len(newest) > BzMinMembers:
			if !quorate(slices.Delete(slices.Clone(newest), i, i+1)) {
				return false
			}
		case !in && (b.c.ran(id) || id == b.traitor):
			if !quorate(slices.Insert(slices.Clone(newest), i, id)) {
				return false
			}
		}
	}
	return true
}

// tellAway tells each running node, once per incarnation and version of
// its latest set, of every member of that set that is away (an honest
// member down): its connection's end, which the transport reports to the
// members that run when it happens, and which a node down, paused or cut
// off then, or whose set held the member only later, missed.
func (b *bzChurnRun) tellAway() {
	for _, id := range b.c.Running() {
		n := b.c.node(id)
		latest, ok := b.sets.latestOf(id)
		if !ok || n.paused {
			continue
		}
		for _, x := range latest.IDs() {
			k := toldKey{node: id, incarnation: n.incarnation, member: x, version: latest.Version}
			if x == id || x == b.traitor || b.c.Up(x) || b.told[k] {
				continue
			}
			b.told[k] = true
			b.res.Told++
			b.c.push(&event{at: b.c.now + 1, sent: b.c.now, kind: down, to: id, msg: protocol.Message{To: x}, inc: n.incarnation})
		}
	}
}

// elect waits, the traitor lying on, for a certified leader within
// ElectBound; it goes on for up to two rounds after it.
func (b *bzChurnRun) elect() error {
	res := b.res
	return b.electCertified(res.SettleAt, res.ElectBound, b.timing, &res.Elected, func() string {
		return fmt.Sprintf("the traitor %d lying: %s; member sets held:%s", b.traitor, b.c.describe(), b.describeSets())
	})
}

// silence has the traitor fall silent, the last disturbance, and counts
// the changes of the member set still due: the running honest members
// the newest set lacks, the members away it holds, and two for a change
// in flight (it may add a member away, or remove one that runs, which
// then needs a change more).
func (b *bzChurnRun) silence() error {
	res, t := b.res, b.timing
	b.lying = false
	b.c.Tap(nil)
	newest := b.sets.newest()
	due := 2
	for _, id := range b.c.Running() {
		if _, in := newest.Key(id); !in {
			due++
		}
	}
	for _, id := range newest.IDs() {
		if id != b.traitor && !b.c.Up(id) {
			due++
		}
	}
	res.Due = due
	res.QuietAt = b.c.Now()
	res.Bound = ByzantineChurnBound(b.spec, t, due)
	res.End = res.QuietAt + res.Bound + 2*(t.LeaderTimeoutTicks+t.CoordinatorTicks)
	b.logf("the traitor falls silent: %d changes due; by tick %d every running member must hold one set, with them all and none away, and the highest must lead",
		due, b.c.Now()+res.Bound)
	return nil
}

// agree waits for the agreement (agreed) within ByzantineChurnBound,
// held to the end of the run.
func (b *bzChurnRun) agree() error {
	res := b.res
	converged, err := b.await(goal{from: res.QuietAt, bound: res.Bound, end: res.End, agreed: b.agreed,
		missing: "no agreement on one member set, with every running honest member and none away, and on the highest running honest ID as leader",
		after:   "the traitor fell silent"})
	res.Convictions = b.c.Convictions()
	if err != nil {
		if errors.Is(err, ErrInvariant) {
			return err
		}
		return fmt.Errorf("%w; member sets held:%s", err, b.describeSets())
	}
	res.Converged = converged
	_, term, _ := b.c.Agreement()
	return b.termKept(term)
}

// agreed reports whether the highest running honest ID leads (Agreement)
// and every running member holds one latest set that holds every one of
// them and, unless it is down to BzMinMembers, no member away.
func (b *bzChurnRun) agreed() bool {
	if _, _, ok := b.c.Agreement(); !ok {
		return false
	}
	set, ok := b.agreedSet()
	return ok && b.complete(set)
}

// agreedSet returns the latest set every running node holds, if they
// hold one (one version: the sets of a version are one, setChecker
// checks).
func (b *bzChurnRun) agreedSet() (certify.MemberSet, bool) {
	var set certify.MemberSet
	found := false
	for _, id := range b.c.Running() {
		s, ok := b.sets.latestOf(id)
		switch {
		case !ok:
			return certify.MemberSet{}, false
		case !found:
			set, found = s, true
		case s.Version != set.Version:
			return certify.MemberSet{}, false
		}
	}
	return set, found
}

// complete reports whether set holds every running node and, unless it is
// down to BzMinMembers, no honest member that is down.
func (b *bzChurnRun) complete(set certify.MemberSet) bool {
	for _, id := range b.c.Running() {
		if _, in := set.Key(id); !in {
			return false
		}
	}
	if len(set.Members) > BzMinMembers {
		for _, id := range set.IDs() {
			if id != b.traitor && !b.c.Up(id) {
				return false
			}
		}
	}
	return true
}

// describeSets names the latest set and the set of the term of each
// running node, for a liveness violation.
func (b *bzChurnRun) describeSets() string {
	var s string
	for _, id := range b.c.Running() {
		if ms, ok := b.c.node(id).m.(MemberSets); ok {
			latest, term := ms.MemberSet()
			s += fmt.Sprintf(" [%d: v%d %v, term %d under v%d]", id, latest.Version, latest.IDs(), b.c.node(id).status.Term, term.Version)
		}
	}
	return s
}

// finish counts what the run did, once the cluster was built.
func (b *bzChurnRun) finish() {
	res := b.res
	if b.c == nil || b.sets == nil {
		return
	}
	res.End = b.c.Now()
	res.Versions = b.sets.versions()
	res.Adds, res.Removes = b.sets.changes()
	if set, ok := b.agreedSet(); ok {
		res.Final = set.IDs()
	}
	for _, id := range b.honest {
		if b.c.ran(id) && !b.c.Up(id) {
			res.Away = append(res.Away, id)
		}
	}
	if b.liar != nil {
		res.SetLies = b.liar.SetLies()
	}
	res.Convictions = b.c.Convictions()
}

// authority is the cluster's authority in a byzantine churn run: it
// issues each member of the pool a credential for its own key, the
// signature of credentialText by a key of its own, hex-encoded; admit
// checks one.
type authority struct {
	cluster string
	key     ed25519.PrivateKey
	public  ed25519.PublicKey
	keys    map[uint64]string // member → the key it issued a credential for
	checked map[string]error  // admit's answers, bounded by maxVerified
}

func newAuthority(cluster string, pool []uint64, keys *certify.Keys) *authority {
	seed := sha256.Sum256([]byte("baton sim authority"))
	a := &authority{cluster: cluster, key: ed25519.NewKeyFromSeed(seed[:]), keys: map[uint64]string{}, checked: map[string]error{}}
	a.public = a.key.Public().(ed25519.PublicKey)
	for _, id := range pool {
		a.keys[id], _ = keys.PublicKey(id)
	}
	return a
}

// credential is the credential it issued member id, for its own key ("" if
// it issued none).
func (a *authority) credential(id uint64) string {
	key, ok := a.keys[id]
	if !ok {
		return ""
	}
	return hex.EncodeToString(ed25519.Sign(a.key, []byte(credentialText(a.cluster, id, key))))
}

// issued reports whether it issued member id a credential for key.
func (a *authority) issued(id uint64, key string) bool {
	k, ok := a.keys[id]
	return ok && k == key
}

// admit checks that cred is its signature of member id's key.
func (a *authority) admit(id uint64, key, cred string) error {
	text := credentialText(a.cluster, id, key)
	memo := text + " " + cred
	if err, ok := a.checked[memo]; ok {
		return err
	}
	var err error
	sig, decodeErr := hex.DecodeString(cred)
	if decodeErr != nil || !ed25519.Verify(a.public, []byte(text), sig) {
		err = fmt.Errorf("sim: member %d: the authority did not issue this credential for %s", id, key)
	}
	if len(a.checked) >= maxVerified {
		clear(a.checked)
	}
	a.checked[memo] = err
	return err
}
