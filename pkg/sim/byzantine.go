package sim

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

// Certified is implemented by a machine that holds the certificate of
// its term's leader (byzantine); the cluster checks it after every step.
type Certified interface {
	Certificate() (certify.Certificate, bool)
}

// certChecker holds the certificates a cluster has seen, and the highest
// term each node accepted. It is one of the cluster's checks (check),
// given the members' keys (Config.Keys).
type certChecker struct {
	noCheck
	c        *Cluster
	keys     certify.Members
	leaders  map[uint64]uint64 // term → the leader its valid certificates name
	refused  map[string]bool   // certificates found invalid, bounded by maxRefused
	accepted acceptedTerms
}

// maxRefused bounds the invalid certificates remembered (to skip checking
// them again); past it they are forgotten.
const maxRefused = 4096

func newCertChecker(c *Cluster, keys certify.Members) *certChecker {
	return &certChecker{c: c, keys: keys, leaders: map[uint64]uint64{}, refused: map[string]bool{}, accepted: acceptedTerms{}}
}

// sent checks the certificate a message on the network carries.
func (k *certChecker) sent(m protocol.Message, how string, from uint64) { k.check(m.Cert, how, from) }

// stepped checks the certificate node n's machine holds (Certified).
func (k *certChecker) stepped(n *node, _ driver.Step) {
	if cm, ok := n.m.(Certified); ok {
		if cert, held := cm.Certificate(); held {
			k.check(&cert, "held by", n.id)
		}
	}
}

// status checks that node n's term does not go back (acceptedTerms).
func (k *certChecker) status(n *node, st election.SoftState) { k.accepted.check(k.c, n, st) }

// acceptedTerms is the highest term each node accepted, in any
// incarnation: a certifying algorithm stores every term it enters (with
// its proof) before it acts in it, so a node's term never goes back even
// across restarts.
type acceptedTerms map[uint64]uint64

// check fails c if node n's term went back.
func (a acceptedTerms) check(c *Cluster, n *node, st election.SoftState) {
	if st.Term < a[n.id] {
		c.fail("node %d accepted term %d, below term %d it accepted before", n.id, st.Term, a[n.id])
	}
	a[n.id] = max(a[n.id], st.Term)
}

// check checks a certificate seen on the network or held by a node (how,
// who: where it was seen): if it is valid, no valid certificate of its
// term may name another leader. A certificate naming the leader already
// certified for its term is not checked again.
func (k *certChecker) check(cert *certify.Certificate, how string, who uint64) {
	if cert == nil {
		return
	}
	c := k.c
	if l, ok := k.leaders[cert.Term]; ok && l == cert.Leader {
		return
	}
	key := fmt.Sprint(cert.Cluster, cert.Term, cert.Leader, len(cert.Votes))
	if len(cert.Votes) > 0 {
		key += string(cert.Votes[0].Signature)
	}
	if k.refused[key] {
		return
	}
	if certify.VerifyCertificate(k.keys, *cert) != nil {
		if len(k.refused) >= maxRefused {
			clear(k.refused)
		}
		k.refused[key] = true
		return
	}
	if l, ok := k.leaders[cert.Term]; ok {
		c.fail("two certified leaders in term %d: %d and %d (a certificate %s %d)", cert.Term, l, cert.Leader, how, who)
		return
	}
	k.leaders[cert.Term] = cert.Leader
	c.logf("certified: %d leads term %d (a certificate %s %d)", cert.Leader, cert.Term, how, who)
}

// verifyCache remembers the answers of the members' keys: in a run every
// receiver of a broadcast checks the same signatures, and Ed25519 checks
// dominate its cost. The answers are those of the keys (a signature's
// validity never changes); the cache is bounded by maxVerified, past
// which it is forgotten.
type verifyCache struct {
	certify.Members
	seen map[string]error
}

const maxVerified = 1 << 16

func (v *verifyCache) Verify(member uint64, data, sig []byte) error {
	key := string(binary.BigEndian.AppendUint64(append(slices.Clone(sig), data...), member))
	if err, ok := v.seen[key]; ok {
		return err
	}
	err := v.Members.Verify(member, data, sig)
	if len(v.seen) >= maxVerified {
		clear(v.seen)
	}
	v.seen[key] = err
	return err
}

// Convictions is how many times a running node reported that a member
// lied (election.MemberLied).
func (c *Cluster) Convictions() int { return c.convictions }

// certifiedLeader reports whether the cluster has a certified leader in
// its current term (the highest term of a running node): a running node
// reports leader (it does so only with a certificate), or a running node
// in that term holds a certificate that names a traitor. A traitor that
// renews its term towards a quorum leads it: that is its right.
func (c *Cluster) certifiedLeader() bool {
	var top uint64
	for _, n := range c.nodes {
		if n.up() {
			if n.reports() {
				return true
			}
			top = max(top, n.status.Term)
		}
	}
	for _, n := range c.nodes {
		if n.up() && n.status.Term == top && n.status.Leader != 0 {
			if _, traitor := slices.BinarySearch(c.traitors, n.status.Leader); traitor {
				return true
			}
		}
	}
	return false
}

// KeyedFactory builds the machine of a member of an algorithm with keys:
// signer signs as cfg.ID, keys are every member's public keys.
type KeyedFactory func(cfg election.Config, cluster string, signer certify.Signer, keys certify.Members) (election.Machine, error)

// ByzantineSpec is an algorithm that elects certified leaders among up to
// f = ⌊(n−1)/3⌋ traitors (byzantine).
type ByzantineSpec struct {
	Name    string
	Factory KeyedFactory
	// PenaltyFactor is how many leader time-outs a member waits before it
	// times out again for a member that failed to lead a term
	// (byzantine.PenaltyFactor).
	PenaltyFactor int
	// Spread ranks the members by election.Spread (SpreadRank of the
	// seed), as Spec.Spread does: the designated leaders, the traitor
	// that is the highest member, and the highest honest member that must
	// lead in the end follow the rank.
	Spread bool
}

// rank is the rank of the run of seed.
func (s ByzantineSpec) rank(seed uint64) election.Rank {
	if s.Spread {
		return SpreadRank(seed)
	}
	return election.ByID()
}

// ByzantineCluster is the cluster name of the byzantine runs.
const ByzantineCluster = "sim"

// ByzantineRound is R, what one term whose designated leader fails
// (down, a traitor, or a member that gave its term up) costs once
// messages arrive in time: the leader time-out, run from when a member
// may vote again, that is after its last grant (LeaseTicks+1) ran out,
// both on a clock up to 5% slow, and the time-outs' and the next
// proposal's delays.
func ByzantineRound(t election.Timing) int {
	return (t.LeaderTimeoutTicks+t.LeaseTicks+2)*21/20 + 4*TMax
}

// ElectBound is how many ticks after the network settles (every message
// between honest members arrives within TMax, the traitors still lying)
// a leader is certified, with n members and f traitors:
//
//	MaxFaultDelay + (f+2)·R
//
// MaxFaultDelay for the copies of the fault phase to arrive or expire;
// then at most f terms in a row whose designated leaders fail (the
// designated leaders follow the members from the highest ID down, and at
// most f members are traitors or down), one in which the members catch
// up on each other's terms (and the term of a member restarted after
// settling, which it gives up), and the term that elects: f+2 rounds R
// (ByzantineRound).
func ElectBound(n int, t election.Timing) int {
	return MaxFaultDelay + (certify.F(n)+2)*ByzantineRound(t)
}

// HighestBound is how many ticks after the traitors fall silent, nothing
// else going wrong, the highest running honest ID leads: a member waits
// up to PenaltyFactor leader time-outs before it times out for a member
// that failed to lead a term (on a clock up to 5% slow), a leader
// time-out for a silent traitor above it to count as dead, and then f+3
// rounds R: ElectBound's f+2 and the hand-over to the highest.
func HighestBound(spec ByzantineSpec, n int, t election.Timing) int {
	return (spec.PenaltyFactor+1)*t.LeaderTimeoutTicks*21/20 + (certify.F(n)+3)*ByzantineRound(t)
}

// ByzantineResult is the outcome of one byzantine run.
type ByzantineResult struct {
	Result
	// Traitors are the members that lied.
	Traitors []uint64
	// SettleAt is the tick from which messages arrive in time; Elected
	// how many ticks after it a leader was first certified (-1 if not),
	// within ElectBound.
	SettleAt, Elected, ElectBound int
	// Lies is how many copies the traitors sent; Convictions how many
	// times an honest member found one out.
	Lies, Convictions int
	// Orders is what the agreement on the orders did; OrderLies how many
	// order messages the traitors withheld, bent, replayed or issued.
	Orders    OrderStats
	OrderLies int
}

// RunByzantine runs one random run of spec with n members (4 if n < 4):
// up to f = ⌊(n−1)/3⌋ of them, at random, are traitors (Traitor, each
// running an honest machine of its own whose output it bends, and lying
// besides), the others honest nodes that face the faults of RunSeed
// (crashes, restarts from their disks, resignations, pauses, partitions,
// lost, duplicated and late copies, clock rates within the drift bound)
// for up to 300 ticks. Then the network settles (healed, reliable,
// delays within TMax) with at most f members traitors or down, the
// traitors still lying: a leader must be certified within ElectBound.
// Then the traitors fall silent: the highest running honest ID must lead
// within HighestBound and go on leading. Every invariant of the cluster
// is checked after every step, with leases and certificates. Throughout,
// the members agree on the certified leader's orders, the traitors lying
// about them to the end (see the package doc, Orders): IC1, IC2 and the
// decisions within OrderBound are checked too.
func RunByzantine(seed uint64, spec ByzantineSpec, n int, trace io.Writer) ByzantineResult {
	b := &byzantineRun{spec: spec, n: max(n, 4), res: &ByzantineResult{Result: Result{Seed: seed, Converged: -1}, Elected: -1}}
	b.rng, b.trace = rand.New(rand.NewPCG(seed, 0x62797a616e74)), trace
	b.res.Err = chain(b.setup, b.orders, b.traitors, b.faultPhase, b.settle, b.elect, b.silence, b.agree)
	b.finish()
	return *b.res
}

// byzantineRun is a run of RunByzantine under way.
type byzantineRun struct {
	run
	spec     ByzantineSpec
	n        int
	res      *ByzantineResult
	timing   election.Timing
	faulty   Network // the network of the fault phase
	f        faults
	k        int      // how many traitors
	honest   []uint64 // the honest members, sorted
	members  []uint64 // sorted
	signers  map[uint64]certify.Signer
	verifier *verifyCache // the members' keys
	factory  Factory
	orng     *rand.Rand // the orders' random source
	relay    *RelayKeys
	relays   map[uint64]certify.Signer
	liars    map[uint64]*Traitor
	od       *orderDriver // nil until the orders run
	lying    bool
	ticks    int // the fault phase
	started  []bool
	startAt  []int
}

// setup draws the members, the traitors among them and the faults, and
// builds the cluster with the members' keys, every node down.
func (b *byzantineRun) setup() error {
	rng, n, res := b.rng, b.n, b.res
	members := make([]uint64, 0, n)
	for _, i := range rng.Perm(3 * n)[:n] {
		members = append(members, uint64(i)+1)
	}
	slices.Sort(members)
	f := certify.F(n)
	k := f
	if rng.IntN(2) == 0 {
		k = rng.IntN(f + 1)
	}
	var traitors []uint64
	for _, i := range rng.Perm(n)[:k] {
		traitors = append(traitors, members[i])
	}
	rank := b.spec.rank(res.Seed)
	if top := rank.Highest(members); k > 0 && !slices.Contains(traitors, top) && rng.IntN(3) == 0 {
		traitors[0] = top // the highest member lies
	}
	slices.Sort(traitors)
	for _, id := range members {
		if !slices.Contains(traitors, id) {
			b.honest = append(b.honest, id)
		}
	}
	b.members, b.k = members, k
	b.timing = election.DefaultLeaseTiming(n)
	b.faulty, b.f = drawFaults(rng, n)
	drift := int64(election.DefaultMaxDrift * ppm)
	rates := make(map[uint64]int64)
	for _, id := range members {
		rates[id] = ppm - drift + rng.Int64N(2*drift+1)
	}
	b.ticks = rng.IntN(300)
	res.Members, res.Traitors, res.ElectBound = slices.Clone(members), traitors, ElectBound(n, b.timing)
	res.Bound = HighestBound(b.spec, n, b.timing)
	if b.trace != nil {
		fmt.Fprintf(b.trace, "seed %d: %s, members %v, traitors %v, timing %+v, fault network %+v for %d ticks; faults %+v; clock rates %v; bounds %d to elect, %d for the highest\n",
			res.Seed, b.spec.Name, members, traitors, b.timing, b.faulty, b.ticks, b.f, rates, res.ElectBound, res.Bound)
		traceRank(b.trace, rank, members)
	}
	keys, signers, err := MemberKeys(members)
	if err != nil {
		return err
	}
	verifier := &verifyCache{Members: keys, seen: map[string]error{}}
	b.signers, b.verifier = signers, verifier
	b.factory = func(cfg election.Config) (election.Machine, error) {
		return b.spec.Factory(cfg, ByzantineCluster, signers[cfg.ID], verifier)
	}
	b.c, err = New(Config{Members: members, Timing: b.timing, Factory: b.factory, Leases: true, Rates: rates, Rand: rng,
		Network: b.faulty, Trace: b.trace, Keys: verifier, Traitors: traitors, Rank: rank})
	return err
}

// orders makes every honest node run the agreement on the orders beside
// its election machine, on a random stream of their own: the elections of
// a seed are the same with them as without.
func (b *byzantineRun) orders() error {
	b.orng = rand.New(rand.NewPCG(b.res.Seed, 0x6f7264657273))
	b.relay = NewRelayKeys(b.verifier, b.members)
	b.relays = make(map[uint64]certify.Signer, b.n)
	for _, id := range b.members {
		b.relays[id] = b.relay.Signer(id)
	}
	return b.c.EnableOrders(OrdersConfig{Cluster: ByzantineCluster, Keys: b.relay, Signers: b.relays, Rand: b.orng,
		MaxInFlight: MaxOrderInFlight(b.n)})
}

// traitors makes the traitors, each with an honest machine of its own
// and an agreement machine of its own to bend; they hear what reaches
// them, lie before every tick from now on, and drive the orders with
// the certified leaders.
func (b *byzantineRun) traitors() error {
	c, traitors := b.c, b.res.Traitors
	b.liars = make(map[uint64]*Traitor, b.k)
	for _, id := range traitors {
		shadow, err := b.factory(election.Config{ID: id, Members: slices.Clone(b.members), Timing: b.timing, Incarnation: 1, Rank: b.c.Rank()})
		if err != nil {
			return err
		}
		orders, err := agreement.New(agreement.Config{Cluster: ByzantineCluster, Signer: b.relays[id], Members: b.members,
			Keys: b.relay, Round: OrderRound * tick, MaxOrders: 16, Default: OrderDefault})
		if err != nil {
			return err
		}
		b.liars[id] = NewTraitor(TraitorConfig{ID: id, Signer: b.signers[id], Cluster: ByzantineCluster, Members: b.members, Rank: b.c.Rank(),
			Accomplices: traitors, Shadow: shadow, Rand: b.rng,
			Orders: orders, OrderSigner: b.relays[id], OrderKeys: b.relay, OrderRand: b.orng})
	}
	c.Tap(func(to uint64, m protocol.Message) {
		if l, ok := b.liars[to]; ok {
			l.Receive(m)
		}
	})
	c.TapOrders(func(to uint64, om protocol.OrderMessage) {
		if l, ok := b.liars[to]; ok {
			l.ReceiveOrder(c.orderTime(), om)
		}
	})
	b.od = &orderDriver{c: c, rng: b.orng, traitors: traitors, liars: b.liars, fault: faultOrderRate(b.n), left: settledOrders(b.n, b.orng)}
	c.BeforeTick(b.od.tick)
	b.lying = true
	b.before = b.lie
	return nil
}

// lie has the traitors, while they lie, send their lies of one tick.
func (b *byzantineRun) lie() error {
	if !b.lying {
		return nil
	}
	for _, id := range b.res.Traitors {
		for _, lie := range b.liars[id].Tick() {
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
	}
	return nil
}

// faultPhase runs the fault phase: the honest nodes start within the
// first leader time-out, then face the faults; the traitors lie from the
// start.
func (b *byzantineRun) faultPhase() error {
	b.startAt = make([]int, len(b.honest))
	for i := range b.startAt {
		b.startAt[i] = b.rng.IntN(b.timing.LeaderTimeoutTicks)
	}
	b.started = make([]bool, len(b.honest))
	p := &faultPhase{c: b.c, rng: b.rng, f: b.f, ids: b.honest, startAt: b.startAt, started: b.started}
	return b.phase(b.ticks, func() error { p.step(); return nil }, nil)
}

// settle has the network settle: healed, resumed, reliable, delays within
// TMax. At most f members are traitors or down: each crashed honest node
// restarts or stays down, within that. Then, in a third of the runs, one
// running honest node restarts within a leader time-out. The orders
// issued from here on are checked.
func (b *byzantineRun) settle() error {
	b.logf("the network settles")
	if err := b.settleNetwork(b.faulty); err != nil {
		return err
	}
	b.bringUp(b.honest, b.started, len(b.honest)-(certify.F(b.n)-b.k))
	if _, err := b.restartOne(b.honest, b.timing.LeaderTimeoutTicks); err != nil {
		return err
	}
	b.res.SettleAt = b.c.Now()
	b.c.CheckOrdersFrom()
	b.od.settled = true
	b.logf("settled: a leader must be certified by tick %d", b.c.Now()+b.res.ElectBound)
	return nil
}

// elect waits, the traitors lying on, for a certified leader within
// ElectBound; they go on for up to two rounds after it.
func (b *byzantineRun) elect() error {
	res := b.res
	return b.electCertified(res.SettleAt, res.ElectBound, b.timing, &res.Elected, func() string {
		return fmt.Sprintf("the traitors %v lying: %s", res.Traitors, b.c.describe())
	})
}

// electCertified waits, the liars lying on, for a certified leader
// within bound ticks of settleAt, and records how long after settleAt in
// elected (-1 until then); the liars go on for up to two rounds
// (ByzantineRound) after it. liars describes them for a violation.
func (r *run) electCertified(settleAt, bound int, t election.Timing, elected *int, liars func() string) error {
	lieUntil := settleAt + bound
	for r.c.Now() < lieUntil {
		if err := r.tick(); err != nil {
			return err
		}
		if *elected < 0 && r.c.certifiedLeader() {
			*elected = r.c.Now() - settleAt
			lieUntil = r.c.Now() + r.rng.IntN(2*ByzantineRound(t)+1)
			r.logf("a certified leader, %d ticks after settling", *elected)
		}
	}
	if *elected < 0 {
		err := fmt.Errorf("sim: liveness violated: no certified leader %d ticks after the network settled (tick %d), %s",
			bound, r.c.Now(), liars())
		r.logf("VIOLATION %v", err)
		return err
	}
	return nil
}

// silence has the traitors fall silent: the last disturbance.
func (b *byzantineRun) silence() error {
	res, t := b.res, b.timing
	b.lying = false
	b.c.Tap(nil)
	res.QuietAt = b.c.Now()
	res.End = res.QuietAt + res.Bound + 2*(t.LeaderTimeoutTicks+t.CoordinatorTicks)
	b.logf("the traitors fall silent: the highest honest ID must lead by tick %d", b.c.Now()+res.Bound)
	return nil
}

// agree waits for the highest running honest ID to lead within
// HighestBound, held to the end of the run.
func (b *byzantineRun) agree() error {
	converged, err := b.highest(b.res.QuietAt, b.res.Bound, b.res.End, "running honest", "the traitors fell silent", nil)
	b.res.Convictions = b.c.Convictions()
	if err != nil {
		return err
	}
	b.res.Converged = converged
	return nil
}

// finish gathers what the orders did, once they ran, and their first
// violation if the run had none.
func (b *byzantineRun) finish() {
	if b.od == nil {
		return
	}
	out := b.res
	out.Orders = b.c.OrderStats()
	for _, l := range b.liars {
		out.OrderLies += l.OrderLies()
	}
	if out.Err == nil {
		out.Err = b.od.err
	}
	if out.Err == nil {
		out.Err = b.c.OrdersErr()
	}
}

// faultOrderRate is the chance, per tick of the fault phase, that the
// certified leader (if any) issues an order among n members. An order of
// OM(f) sends about n^(f+1) relays (generals.MessageCount: 9 at n = 4,
// 156 at 7, 3,609 at 10), so the larger clusters issue fewer, and ten
// members none in the fault phase.
func faultOrderRate(n int) float64 {
	switch certify.F(n) {
	case 1:
		return 1.0 / 40
	case 2:
		return 1.0 / 200
	}
	return 0
}

// settledOrders is how many orders the certified leader issues, one after
// the other, once the network settled and a leader is certified: among
// 10 members, one in a third of the runs (see faultOrderRate).
func settledOrders(n int, rng *rand.Rand) int {
	switch certify.F(n) {
	case 1:
		return 3
	case 2:
		return 2
	}
	if rng.IntN(3) == 0 {
		return 1
	}
	return 0
}

// orderDriver drives, at the start of every tick of a byzantine run, what
// does not run in the cluster: the traitors' lies about the orders, and
// the orders the certified leader issues (at random in the fault phase;
// once the network settled, settledOrders of them, each OrderBound+1
// ticks after the last).
type orderDriver struct {
	c        *Cluster
	rng      *rand.Rand
	traitors []uint64
	liars    map[uint64]*Traitor
	fault    float64
	settled  bool
	left     int // settled orders still to issue
	next     int // tick of the next settled order
	issued   int
	err      error
}

func (d *orderDriver) tick() {
	if d.err != nil {
		return
	}
	now := d.c.orderTime()
	for _, id := range d.traitors {
		for _, om := range d.liars[id].TickOrders(now) {
			if err := d.c.InjectOrder(om); err != nil {
				d.err = fmt.Errorf("sim: traitor %d: an invalid order message: %w", id, err)
				return
			}
		}
		for _, e := range d.liars[id].FramedEvidence() {
			d.c.fail("traitor %d holds relay evidence against %d, an honest member: two relays of order %d/%d along %v it signed",
				id, e.Member(), e.First.Statement.Term, e.First.Statement.Order, e.First.Statement.Path)
		}
	}
	switch {
	case !d.settled:
		if d.rng.Float64() < d.fault {
			d.issue()
		}
	case d.left > 0 && d.c.Now() >= d.next:
		if d.issue() {
			d.left--
			d.next = d.c.Now() + OrderBound(len(d.c.members)) + 1
		}
	}
}

// issue has the certified leader of the highest term, if any, issue an
// order: an honest node that reports leader, or a traitor that holds a
// valid certificate of its own for a term at least that of every running
// honest node. It reports whether an order was issued.
func (d *orderDriver) issue() bool {
	c := d.c
	var honest *node
	var top uint64
	for _, n := range c.nodes {
		if n.up() {
			top = max(top, n.status.Term)
			if n.reports() && c.orders.of(n.id).ag != nil && !n.paused && (honest == nil || n.status.Term > honest.status.Term) {
				honest = n
			}
		}
	}
	var liar *Traitor
	var cert certify.Certificate
	for _, id := range d.traitors {
		if cc, ok := d.liars[id].Certificate(); ok && cc.Term >= top && (liar == nil || cc.Term > cert.Term) &&
			certify.VerifyCertificate(c.orders.cfg.Keys, cc) == nil {
			liar, cert = d.liars[id], cc
		}
	}
	switch {
	case liar != nil && (honest == nil || cert.Term > honest.status.Term):
		for _, om := range liar.IssueOrder(cert) {
			if err := c.InjectOrder(om); err != nil {
				d.err = fmt.Errorf("sim: traitor %d: an invalid order: %w", liar.ID(), err)
				return false
			}
		}
		return true
	case honest != nil:
		d.issued++
		if _, err := c.IssueOrder(honest.id, fmt.Sprintf("order %d", d.issued)); err != nil {
			c.logf("order not issued by %d: %v", honest.id, err)
			return false
		}
		return true
	}
	return false
}
