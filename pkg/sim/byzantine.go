package sim

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

// certChecker holds the certificates a cluster has seen.
type certChecker struct {
	keys    certify.Members
	leaders map[uint64]uint64 // term → the leader its valid certificates name
	refused map[string]bool   // certificates found invalid, bounded by maxRefused
}

// maxRefused bounds the invalid certificates remembered (to skip checking
// them again); past it they are forgotten.
const maxRefused = 4096

func newCertChecker(keys certify.Members) *certChecker {
	return &certChecker{keys: keys, leaders: map[uint64]uint64{}, refused: map[string]bool{}}
}

// checkCert checks a certificate seen on the network or held by a node
// (how, who: where it was seen): if it is valid, no valid certificate of
// its term may name another leader. A certificate naming the leader
// already certified for its term is not checked again.
func (c *Cluster) checkCert(cert *certify.Certificate, how string, who uint64) {
	if cert == nil || c.certs == nil {
		return
	}
	k := c.certs
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
func RunByzantine(seed uint64, spec ByzantineSpec, n int, trace io.Writer) (out ByzantineResult) {
	rng := rand.New(rand.NewPCG(seed, 0x62797a616e74))
	n = max(n, 4)
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
	if k > 0 && !slices.Contains(traitors, members[n-1]) && rng.IntN(3) == 0 {
		traitors[0] = members[n-1] // the highest ID lies
	}
	slices.Sort(traitors)
	var honest []uint64
	for _, id := range members {
		if !slices.Contains(traitors, id) {
			honest = append(honest, id)
		}
	}
	timing := election.DefaultLeaseTiming(n)
	faulty, faults := drawFaults(rng, n)
	drift := int64(election.DefaultMaxDrift * ppm)
	rates := make(map[uint64]int64)
	for _, id := range members {
		rates[id] = ppm - drift + rng.Int64N(2*drift+1)
	}
	faultTicks := rng.IntN(300)
	res := ByzantineResult{
		Result:   Result{Seed: seed, Members: slices.Clone(members), Converged: -1},
		Traitors: traitors, Elected: -1, ElectBound: ElectBound(n, timing),
	}
	res.Bound = HighestBound(spec, n, timing)
	if trace != nil {
		fmt.Fprintf(trace, "seed %d: %s, members %v, traitors %v, timing %+v, fault network %+v for %d ticks; faults %+v; clock rates %v; bounds %d to elect, %d for the highest\n",
			seed, spec.Name, members, traitors, timing, faulty, faultTicks, faults, rates, res.ElectBound, res.Bound)
	}

	keys, signers, err := MemberKeys(members)
	if err != nil {
		res.Err = err
		return res
	}
	verifier := &verifyCache{Members: keys, seen: map[string]error{}}
	factory := func(cfg election.Config) (election.Machine, error) {
		return spec.Factory(cfg, ByzantineCluster, signers[cfg.ID], verifier)
	}
	c, err := New(Config{Members: members, Timing: timing, Factory: factory, Leases: true, Rates: rates, Rand: rng,
		Network: faulty, Trace: trace, Keys: verifier, Traitors: traitors})
	if err != nil {
		res.Err = err
		return res
	}
	// The orders draw on a stream of their own: the elections of a seed
	// are the same with them as without.
	orng := rand.New(rand.NewPCG(seed, 0x6f7264657273))
	relayKeys := NewRelayKeys(verifier, members)
	relaySigners := make(map[uint64]certify.Signer, n)
	for _, id := range members {
		relaySigners[id] = relayKeys.Signer(id)
	}
	if res.Err = c.EnableOrders(OrdersConfig{Cluster: ByzantineCluster, Keys: relayKeys, Signers: relaySigners, Rand: orng,
		MaxInFlight: MaxOrderInFlight(n)}); res.Err != nil {
		return res
	}
	liars := make(map[uint64]*Traitor, k)
	for _, id := range traitors {
		shadow, err := factory(election.Config{ID: id, Members: slices.Clone(members), Timing: timing, Incarnation: 1})
		if err != nil {
			res.Err = err
			return res
		}
		orders, err := agreement.New(agreement.Config{Cluster: ByzantineCluster, Signer: relaySigners[id], Members: members,
			Keys: relayKeys, Round: OrderRound * tick, MaxOrders: 16, Default: OrderDefault})
		if err != nil {
			res.Err = err
			return res
		}
		liars[id] = NewTraitor(TraitorConfig{ID: id, Signer: signers[id], Cluster: ByzantineCluster, Members: members,
			Accomplices: traitors, Shadow: shadow, Rand: rng,
			Orders: orders, OrderSigner: relaySigners[id], OrderKeys: relayKeys, OrderRand: orng})
	}
	c.Tap(func(to uint64, m protocol.Message) {
		if l, ok := liars[to]; ok {
			l.Receive(m)
		}
	})
	c.TapOrders(func(to uint64, om protocol.OrderMessage) {
		if l, ok := liars[to]; ok {
			l.ReceiveOrder(c.orderTime(), om)
		}
	})
	od := &orderDriver{c: c, rng: orng, traitors: traitors, liars: liars, fault: faultOrderRate(n), left: settledOrders(n, orng)}
	c.BeforeTick(od.tick)
	defer func() { // on every return from here on, on the result returned
		out.Orders = c.OrderStats()
		for _, l := range liars {
			out.OrderLies += l.OrderLies()
		}
		if out.Err == nil {
			out.Err = od.err
		}
		if out.Err == nil {
			out.Err = c.OrdersErr()
		}
	}()
	lying := true
	// step lets the traitors lie, then one tick pass.
	step := func() error {
		if lying {
			for _, id := range traitors {
				for _, lie := range liars[id].Tick() {
					var err error
					if lie.To == 0 {
						err = c.Inject(lie.Message)
					} else {
						err = c.InjectTo(lie.Message, lie.To)
					}
					if err != nil {
						return err
					}
					res.Lies++
				}
			}
		}
		c.Tick()
		return c.Err()
	}

	// Fault phase: the honest nodes start within the first leader
	// time-out, then face the faults; the traitors lie from the start.
	startAt := make([]int, len(honest))
	for i := range startAt {
		startAt[i] = rng.IntN(timing.LeaderTimeoutTicks)
	}
	started := make([]bool, len(honest))
	p := &faultPhase{c: c, rng: rng, f: faults, ids: honest, startAt: startAt, started: started}
	for c.Now() < faultTicks {
		p.step()
		if res.Err = step(); res.Err != nil {
			return res
		}
	}

	// The network settles: healed, resumed, reliable, delays within
	// TMax. At most f members are traitors or down: each crashed honest
	// node restarts or stays down, within that. Then, in a third of the
	// runs, one running honest node restarts within a leader time-out.
	if trace != nil {
		fmt.Fprintf(trace, "%5d  the network settles\n", c.Now())
	}
	c.Heal()
	if res.Err = c.SetNetwork(Network{MinDelay: 1, MaxDelay: TMax, Unreachable: faulty.Unreachable, Events: faulty.Events}); res.Err != nil {
		return res
	}
	down := 0
	for i, id := range honest {
		c.Resume(id)
		if !started[i] || (!c.Up(id) && rng.IntN(2) == 0) {
			c.Start(id)
		}
		if !c.Up(id) {
			down++
		}
	}
	for _, i := range rng.Perm(len(honest)) {
		if down <= f-k {
			break
		}
		if id := honest[i]; !c.Up(id) {
			c.Start(id)
			down--
		}
	}
	if rng.IntN(3) == 0 {
		for range rng.IntN(timing.LeaderTimeoutTicks) {
			if res.Err = step(); res.Err != nil {
				return res
			}
		}
		var running []uint64
		for _, id := range honest {
			if c.Up(id) {
				running = append(running, id)
			}
		}
		c.Start(running[rng.IntN(len(running))])
	}
	res.SettleAt = c.Now()
	c.CheckOrdersFrom()
	od.settled = true
	if trace != nil {
		fmt.Fprintf(trace, "%5d  settled: a leader must be certified by tick %d\n", c.Now(), c.Now()+res.ElectBound)
	}

	// The traitors lie on: a leader must be certified within ElectBound.
	// They go on for up to two rounds after it.
	lieUntil := res.SettleAt + res.ElectBound
	for c.Now() < lieUntil {
		if res.Err = step(); res.Err != nil {
			return res
		}
		if res.Elected < 0 && c.certifiedLeader() {
			res.Elected = c.Now() - res.SettleAt
			lieUntil = c.Now() + rng.IntN(2*ByzantineRound(timing)+1)
			if trace != nil {
				fmt.Fprintf(trace, "%5d  a certified leader, %d ticks after settling\n", c.Now(), res.Elected)
			}
		}
	}
	if res.Elected < 0 {
		res.Err = fmt.Errorf("sim: liveness violated: no certified leader %d ticks after the network settled (tick %d), the traitors %v lying: %s",
			res.ElectBound, c.Now(), traitors, c.describe())
		if trace != nil {
			fmt.Fprintf(trace, "%5d  VIOLATION %v\n", c.Now(), res.Err)
		}
		return res
	}

	// The traitors fall silent: the highest running honest ID must lead.
	lying = false
	c.Tap(nil)
	res.QuietAt = c.Now()
	res.End = res.QuietAt + res.Bound + 2*(timing.LeaderTimeoutTicks+timing.CoordinatorTicks)
	if trace != nil {
		fmt.Fprintf(trace, "%5d  the traitors fall silent: the highest honest ID must lead by tick %d\n", c.Now(), c.Now()+res.Bound)
	}
	converged, err := c.awaitAgreement(res.QuietAt, res.Bound, res.End, "running honest", "the traitors fell silent", trace, nil)
	res.Convictions = c.Convictions()
	if err != nil {
		res.Err = err
		return res
	}
	res.Converged = converged
	return res
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
			if n.reports() && n.ag != nil && !n.paused && (honest == nil || n.status.Term > honest.status.Term) {
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
