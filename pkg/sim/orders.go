package sim

import (
	"bytes"
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/generals"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

// OrderRound is the duration of a round of the agreement on the orders
// (agreement.Config.Round) in the byzantine runs, in ticks of the
// members' clocks. A relay of round L leaves its honest sender at the
// latest when its round L−1 ends and arrives within TMax; its receiver
// opened the order at most TMax−1 ticks before the sender, and ends round
// L at L rounds on its own clock, up to 5% fast while the sender's is up
// to 5% slow: R·(L/1.05 − (L−1)/0.95) > 2·TMax holds for L ≤ 4 (f ≤ 3)
// from R = 7. One more tick of margin.
const OrderRound = 8

// OrderDefault is the agreement's default value in the byzantine runs.
const OrderDefault = "retreat"

// OrderBound is how many ticks after an honest certified leader issues an
// order, the network settled, every honest member that runs throughout
// has decided it: TMax for the leader's message, then f+1 rounds on a
// clock up to 5% slow, and a tick to notice the last deadline.
func OrderBound(n int) int {
	return TMax + ((certify.F(n)+1)*OrderRound*20+18)/19 + 1
}

// maxOrderRecords bounds the orders the cluster keeps track of; past it
// the oldest is forgotten.
const maxOrderRecords = 64

// maxOrderBacklog bounds the order messages that wait for a paused node
// (the orders service's inbox).
const maxOrderBacklog = 4096

// ErrOrderLiveness is wrapped by the error of an order that an honest
// member did not decide in time.
var ErrOrderLiveness = errors.New("sim: order not decided in time")

// OrdersConfig makes the honest members of a cluster run the agreement on
// the orders (package orders/agreement) beside their election machines.
type OrdersConfig struct {
	// Cluster is the cluster's name, signed into the relays.
	Cluster string
	// Keys check the certificates and the relays' signatures.
	Keys certify.Members
	// Signers sign each honest member's relays, with its own key.
	Signers map[uint64]certify.Signer
	// Rand draws the fate of each copy of an order message (the faults of
	// Network), apart from the election's so that the elections of a seed
	// do not depend on the orders.
	Rand *rand.Rand
	// MaxInFlight bounds the copies of order messages in flight: more is
	// a message storm.
	MaxInFlight int
}

// orderBook is what the cluster keeps of the orders. It is one of the
// cluster's checks: the cluster tells it what its nodes do (check).
type orderBook struct {
	noCheck
	c       *Cluster
	cfg     OrdersConfig
	nodes   map[uint64]*orderNode
	queue   orderQueue
	seq     uint64
	tap     func(to uint64, om protocol.OrderMessage)
	records map[agreement.ID]*orderRecord
	ids     []agreement.ID // records, oldest first
	// checkFrom is the tick from which an order issued is checked (the
	// network settled); -1 before.
	checkFrom int
	// topTerm is the highest term of an order issued so far.
	topTerm uint64
	err     error
	stats   OrderStats
}

// orderNode is what a node keeps of the orders: its agreement machine
// (nil while down), the term of the certificate it was last given, the
// greatest order it took part in, kept on its disk, and the order
// messages that arrived while it was paused.
type orderNode struct {
	ag      *agreement.Machine
	term    uint64
	floor   agreement.ID
	backlog []*orderCopy
}

// of returns what node id keeps of the orders.
func (b *orderBook) of(id uint64) *orderNode {
	o := b.nodes[id]
	if o == nil {
		o = &orderNode{}
		b.nodes[id] = o
	}
	return o
}

// The orders' part of what the cluster tells its checks.

func (b *orderBook) started(n *node)                { b.c.startOrders(n) }
func (b *orderBook) disturbed(n *node)              { b.c.disturbOrders(n.id) }
func (b *orderBook) resumed(n *node)                { b.c.resumeOrders(n) }
func (b *orderBook) wiped(n *node)                  { b.of(n.id).floor = agreement.ID{} }
func (b *orderBook) advanced(n *node)               { b.c.tickOrders(n) }
func (b *orderBook) stepped(n *node, _ driver.Step) { b.c.leadOrders(n) }

func (b *orderBook) stopped(n *node) {
	o := b.of(n.id)
	o.ag, o.backlog = nil, nil
	b.c.disturbOrders(n.id)
}

func (b *orderBook) ticked() {
	b.c.deliverOrders()
	b.c.checkOrderDeadlines()
}

// OrderStats counts what the orders did in a run.
type OrderStats struct {
	// Issued counts the orders issued, by honest leaders and traitors.
	// Checked counts the honest leaders' orders issued after the network
	// settled, with at most f members faulty for them, that every honest
	// member running throughout decided within OrderBound. (IC1 and IC2
	// are checked on every decision of an order issued after the network
	// settled while at most f members are faulty for it.)
	Issued, Checked int
	// Decisions counts the honest members' decisions.
	Decisions int
	// Evidence counts the proofs of a lie the honest members found.
	Evidence int
	// Messages counts the order messages sent (a broadcast once), Copies
	// the copies delivered.
	Messages, Copies int
}

// orderRecord is what the cluster knows of one order.
type orderRecord struct {
	id     agreement.ID
	leader uint64
	honest bool   // issued by an honest member
	value  string // its value, if honest
	at     int    // tick it was issued
	// checked: issued after the network settled; unchecked once more
	// than f members are faulty for it.
	checked bool
	// live: an honest leader's order of the highest term issued so far,
	// which the running members must decide within OrderBound.
	live    bool
	running []uint64          // the honest members running when it was issued
	faulty  map[uint64]bool   // honest members disturbed before they decided it
	decided map[uint64]string // honest members' decisions
}

// EnableOrders makes every honest member run an agreement machine of the
// orders beside its election machine, from its next start: it takes the
// certificates its election machine holds (Lead), the order messages of
// the others, its clock's ticks, and keeps across restarts the greatest
// order it took part in (its disk). Order messages are broadcast and
// face the network as the election's copies do. Call it before any
// Start.
func (c *Cluster) EnableOrders(cfg OrdersConfig) error {
	if cfg.Keys == nil || cfg.Rand == nil || cfg.MaxInFlight <= 0 {
		return errors.New("sim: orders need Keys, Rand and MaxInFlight")
	}
	for _, n := range c.nodes {
		if n.up() {
			return errors.New("sim: orders must be enabled before any node starts")
		}
	}
	c.orders = &orderBook{c: c, cfg: cfg, nodes: map[uint64]*orderNode{}, records: map[agreement.ID]*orderRecord{}, checkFrom: -1}
	c.checks = append(c.checks, c.orders)
	return nil
}

// OrderStats returns what the orders did so far.
func (c *Cluster) OrderStats() OrderStats {
	if c.orders == nil {
		return OrderStats{}
	}
	return c.orders.stats
}

// OrdersErr is the first order an honest member failed to decide in time
// (ErrOrderLiveness), or nil.
func (c *Cluster) OrdersErr() error {
	if c.orders == nil {
		return nil
	}
	return c.orders.err
}

// Certificate returns the certificate node id's machine holds (of its
// term's leader), if it runs and holds one.
func (c *Cluster) Certificate(id uint64) (certify.Certificate, bool) {
	n := c.node(id)
	if cm, ok := n.m.(Certified); ok && n.up() {
		return cm.Certificate()
	}
	return certify.Certificate{}, false
}

// CheckOrdersFrom checks the orders issued from now on: the network has
// settled, at most f members are traitors or down.
func (c *Cluster) CheckOrdersFrom() { c.orders.checkFrom = c.now }

// TapOrders sets fn to see the copies of order messages that reach
// members that are down (the traitors, which never run here), as Tap.
func (c *Cluster) TapOrders(fn func(to uint64, om protocol.OrderMessage)) { c.orders.tap = fn }

// startOrders gives node n, which starts, its agreement machine.
func (c *Cluster) startOrders(n *node) {
	cfg, o := c.orders.cfg, c.orders.of(n.id)
	m, err := agreement.New(agreement.Config{Cluster: cfg.Cluster, Signer: cfg.Signers[n.id], Members: slices.Clone(c.members),
		Keys: cfg.Keys, Round: OrderRound * tick, MaxOrders: 16, Default: OrderDefault, Floor: o.floor})
	if err != nil {
		panic(err) // the configuration is the simulator's own
	}
	o.ag, o.term, o.backlog = m, 0, nil
	c.disturbOrders(n.id)
}

// leadOrders hands node n's agreement machine the certificate its
// election machine holds, if it is of a newer term.
func (c *Cluster) leadOrders(n *node) {
	o := c.orders.of(n.id)
	if o.ag == nil {
		return
	}
	cm, ok := n.m.(Certified)
	if !ok {
		return
	}
	cert, held := cm.Certificate()
	if !held || cert.Term <= o.term {
		return
	}
	o.term = cert.Term
	if err := o.ag.Lead(cert); err != nil {
		c.fail("node %d holds a certificate its agreement machine refuses: %v", n.id, err)
	}
	c.flushOrders(n)
}

// tickOrders ends the rounds of node n's orders that are due on its clock.
func (c *Cluster) tickOrders(n *node) {
	o := c.orders.of(n.id)
	if o.ag == nil {
		return
	}
	if next, ok := o.ag.Next(); ok && !n.time().Before(next) {
		o.ag.Tick(n.time())
		c.flushOrders(n)
	}
}

// IssueOrder has node id, which must run and lead, issue value through its
// agreement machine.
func (c *Cluster) IssueOrder(id uint64, value string) (agreement.Order, error) {
	n := c.node(id)
	if c.orders == nil || c.orders.of(id).ag == nil || n.paused {
		return agreement.Order{}, fmt.Errorf("sim: node %d does not run", id)
	}
	o, err := c.orders.of(id).ag.Issue(n.time(), value)
	if err != nil {
		return o, err
	}
	c.logf("order %d/%d issued by %d: %q", o.Term, o.Seq, id, value)
	c.recordIssue(agreement.ID{Term: o.Term, Seq: o.Seq}, id, true, value)
	c.flushOrders(n)
	return o, nil
}

// recordIssue starts the record of an order.
func (c *Cluster) recordIssue(id agreement.ID, leader uint64, honest bool, value string) {
	b := c.orders
	b.stats.Issued++
	rec := c.record(id, leader)
	rec.honest, rec.value, rec.at = honest, value, c.now
	rec.checked = b.checkFrom >= 0
	rec.live = honest && rec.checked && id.Term >= b.topTerm
	b.topTerm = max(b.topTerm, id.Term)
	rec.running = nil
	for _, n := range c.nodes {
		if b.of(n.id).ag != nil && !n.paused {
			rec.running = append(rec.running, n.id)
		}
	}
}

// record returns the record of order id, made if need be.
func (c *Cluster) record(id agreement.ID, leader uint64) *orderRecord {
	b := c.orders
	if rec := b.records[id]; rec != nil {
		return rec
	}
	rec := &orderRecord{id: id, leader: leader, at: c.now, faulty: map[uint64]bool{}, decided: map[uint64]string{}}
	if len(b.ids) >= maxOrderRecords {
		delete(b.records, b.ids[0])
		b.ids = b.ids[1:]
	}
	b.records[id] = rec
	b.ids = append(b.ids, id)
	return rec
}

// InjectOrder broadcasts om, an order message of a member that does not
// run here (a traitor), or a verbatim copy of another member's message
// that it received (a replay: the message's signature is its sender's).
// A traitor's message with a valid certificate of its own for a new order
// starts the order's record.
func (c *Cluster) InjectOrder(om protocol.OrderMessage) error {
	if err := protocol.ValidateOrderMessage(om); err != nil {
		return err
	}
	if _, traitor := slices.BinarySearch(c.traitors, om.From); traitor && om.Certificate != nil {
		id := agreement.ID{Term: om.Term, Seq: om.Seq}
		_, known := c.orders.records[id]
		if !known && certify.VerifyCertificateFor(c.orders.cfg.Keys, *om.Certificate, c.orders.cfg.Cluster, om.Term, om.From) == nil {
			c.logf("order %d/%d issued by traitor %d", om.Term, om.Seq, om.From)
			c.recordIssue(id, om.From, false, "")
		}
	}
	c.logf("inject order message of %d, order %d/%d, %d relays", om.From, om.Term, om.Seq, len(om.Relays))
	c.broadcastOrder(om, om.From)
	return nil
}

// flushOrders carries out what node n's agreement machine wants done:
// it keeps the greatest order taken part in on the node's disk before the
// messages leave, broadcasts them, and checks the decisions and evidence.
func (c *Cluster) flushOrders(n *node) {
	o := c.orders.of(n.id)
	rd := o.ag.Ready()
	if rd.Highest != nil {
		if !rd.Highest.After(o.floor) {
			c.fail("node %d took part in order %+v, not above %+v it took part in before", n.id, *rd.Highest, o.floor)
		}
		o.floor = *rd.Highest
	}
	for _, om := range rd.Messages {
		if om.From != n.id {
			c.fail("node %d sent an order message as %d", n.id, om.From)
			continue
		}
		if err := protocol.ValidateOrderMessage(om); err != nil {
			c.fail("node %d sent an invalid order message: %v", n.id, err)
			continue
		}
		c.logf("order message of %d, order %d/%d, %d relays", n.id, om.Term, om.Seq, len(om.Relays))
		c.broadcastOrder(om, n.id)
	}
	for _, d := range rd.Decisions {
		c.decided(n, d)
	}
	for _, e := range rd.Evidence {
		c.orders.stats.Evidence++
		if err := certify.VerifyEvidence(c.orders.cfg.Keys, e); err != nil {
			c.fail("node %d found evidence that does not hold: %v", n.id, err)
		}
		if _, traitor := slices.BinarySearch(c.traitors, e.Member()); !traitor {
			c.fail("node %d found relay evidence against %d, an honest member", n.id, e.Member())
		}
		c.logf("node %d convicts %d: two relays of order %d/%d along %v", n.id, e.Member(), e.First.Statement.Term, e.First.Statement.Order, e.First.Statement.Path)
	}
}

// decided checks node n's decision d: IC1 with the others' of the order
// and, for an honest leader's, IC2, while at most f members are faulty
// for it.
func (c *Cluster) decided(n *node, d agreement.Order) {
	id := agreement.ID{Term: d.Term, Seq: d.Seq}
	c.orders.stats.Decisions++
	c.logf("order %d/%d decided by %d: %q", d.Term, d.Seq, n.id, d.Value)
	rec := c.record(id, d.Leader)
	if rec.faulty[n.id] {
		return
	}
	if prev, ok := rec.decided[n.id]; ok {
		c.fail("node %d decided order %d/%d twice: %q and %q", n.id, d.Term, d.Seq, prev, d.Value)
	}
	rec.decided[n.id] = d.Value
	if !rec.checked {
		return
	}
	if c.faultyFor(rec) > certify.F(len(c.members)) {
		rec.checked, rec.live = false, false // OM(f) promises nothing
		return
	}
	if rec.honest && d.Value != rec.value {
		c.fail("IC2: node %d decided %q in order %d/%d of honest leader %d, which issued %q", n.id, d.Value, d.Term, d.Seq, rec.leader, rec.value)
	}
	for _, other := range c.members {
		if v, ok := rec.decided[other]; ok && other != n.id && v != d.Value {
			c.fail("IC1: nodes %d and %d decided %q and %q in order %d/%d of leader %d", other, n.id, v, d.Value, d.Term, d.Seq, rec.leader)
		}
	}
}

// faultyFor is how many members are faulty for order rec so far: the
// traitors, the honest members that did not run when it was issued, and
// those disturbed before they decided it.
func (c *Cluster) faultyFor(rec *orderRecord) int {
	k := len(c.traitors)
	for _, id := range c.members {
		if _, traitor := slices.BinarySearch(c.traitors, id); !traitor && (rec.faulty[id] || !slices.Contains(rec.running, id)) {
			k++
		}
	}
	return k
}

// disturbOrders marks node id faulty for every order it has not decided:
// it stopped, restarted or paused, so it may not have kept the rounds'
// deadlines.
func (c *Cluster) disturbOrders(id uint64) {
	if c.orders == nil {
		return
	}
	for _, rid := range c.orders.ids {
		if rec := c.orders.records[rid]; rec != nil {
			if _, done := rec.decided[id]; !done {
				rec.faulty[id] = true
			}
		}
	}
}

// checkOrderDeadlines checks that every live order is decided, by each
// honest member that ran throughout, within OrderBound.
func (c *Cluster) checkOrderDeadlines() {
	b := c.orders
	if b == nil || b.err != nil {
		return
	}
	for _, rid := range b.ids {
		rec := b.records[rid]
		if !rec.live || c.now != rec.at+OrderBound(len(c.members)) {
			continue
		}
		if c.faultyFor(rec) > certify.F(len(c.members)) {
			continue
		}
		b.stats.Checked++
		for _, id := range rec.running {
			if _, ok := rec.decided[id]; !ok && !rec.faulty[id] {
				b.err = fmt.Errorf("%w: node %d has not decided order %d/%d of honest leader %d, issued at tick %d, %d ticks later (OrderBound): %s",
					ErrOrderLiveness, id, rec.id.Term, rec.id.Seq, rec.leader, rec.at, OrderBound(len(c.members)), c.describe())
				c.logf("VIOLATION %v", b.err)
				return
			}
		}
	}
}

// broadcastOrder puts the copies of om, sent by from, on the network: one
// for every other member, each facing the network's faults on its own.
func (c *Cluster) broadcastOrder(om protocol.OrderMessage, from uint64) {
	b := c.orders
	b.stats.Messages++
	msg := &om
	rng := b.cfg.Rand
	for _, to := range c.members {
		if to == from {
			continue
		}
		if rng.Float64() < c.net.Loss {
			continue
		}
		copies := 1
		if rng.Float64() < c.net.Duplicate {
			copies = 2
		}
		for range copies {
			delay := c.net.MinDelay + rng.IntN(c.net.MaxDelay-c.net.MinDelay+1)
			if c.net.Long > 0 && rng.Float64() < c.net.Long {
				delay = c.net.MaxDelay + 1 + rng.IntN(c.net.LongDelay-c.net.MaxDelay)
			}
			if len(b.queue) >= b.cfg.MaxInFlight {
				if len(b.queue) == b.cfg.MaxInFlight {
					c.fail("more than %d copies of order messages in flight: a message storm", b.cfg.MaxInFlight)
				}
				continue
			}
			b.seq++
			heap.Push(&b.queue, &orderCopy{at: c.now + delay, sent: c.now, seq: b.seq, from: from, to: to, om: msg})
		}
	}
}

// deliverOrders hands out the copies of order messages due.
func (c *Cluster) deliverOrders() {
	b := c.orders
	for len(b.queue) > 0 && b.queue[0].at <= c.now {
		e := heap.Pop(&b.queue).(*orderCopy)
		n := c.node(e.to)
		switch {
		case !n.up():
			if b.tap != nil && c.groups[e.from] == c.groups[e.to] {
				b.tap(e.to, *e.om)
			}
		case c.groups[e.from] != c.groups[e.to]:
		case n.paused:
			if o := b.of(n.id); len(o.backlog) < maxOrderBacklog {
				o.backlog = append(o.backlog, e)
			}
		default:
			c.deliverOrder(n, e)
		}
	}
}

func (c *Cluster) deliverOrder(n *node, e *orderCopy) {
	o := c.orders.of(n.id)
	if o.ag == nil {
		return
	}
	c.orders.stats.Copies++
	o.ag.Receive(n.time(), *e.om)
	c.flushOrders(n)
}

// resumeOrders hands a node that resumes the order messages that waited.
func (c *Cluster) resumeOrders(n *node) {
	o := c.orders.of(n.id)
	backlog := o.backlog
	o.backlog = nil
	for _, e := range backlog {
		if !n.up() || n.paused {
			return
		}
		c.deliverOrder(n, e)
	}
}

// orderCopy is a copy of an order message on the orders' network: from
// its sender to its receiver, due at tick at, sent at tick sent, seq-th
// of the copies.
type orderCopy struct {
	at, sent int
	seq      uint64
	from, to uint64
	om       *protocol.OrderMessage
}

// orderQueue orders the copies of order messages by due tick, then by the
// order they were sent.
type orderQueue []*orderCopy

func (q orderQueue) Len() int { return len(q) }
func (q orderQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q orderQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *orderQueue) Push(x any)   { *q = append(*q, x.(*orderCopy)) }
func (q *orderQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// orderTime is the time of a member that does not run here (a traitor),
// for its agreement machine: real time.
func (c *Cluster) orderTime() time.Time { return epoch.Add(time.Duration(c.now) * tick) }

// MaxOrderInFlight bounds the copies of order messages in flight among n
// members: every relay of OM(f) for maxLiveOrders orders at once, to
// every member, twice.
func MaxOrderInFlight(n int) int {
	return 2 * maxLiveOrders * (n - 1) * generals.MessageCount(n, certify.F(n))
}

// maxLiveOrders is how many orders a run has under way at once, at most.
const maxLiveOrders = 4

// RelayKeys are the members' keys for the relays of the orders in the
// simulator: each member signs its relays with a keyed hash of its own
// (RelaySigner) instead of Ed25519, and every other statement (the votes
// of a leader's certificate) is checked with the members' keys as they
// are. The simulator checks the agreement, not the signature scheme
// (pkg/orders' tests use Ed25519 relays): OM(f) among ten members signs
// and checks hundreds of relays an order, which Ed25519 would make the
// bulk of a run's cost. What matters holds: a member signs with its own
// key alone, and a relay is taken for its sender's only if its sender's
// key made it.
type RelayKeys struct {
	certify.Members
	secrets map[uint64][32]byte
}

// NewRelayKeys returns the relay keys of members (deterministic per ID,
// like MemberKeys), beside keys for the rest.
func NewRelayKeys(keys certify.Members, members []uint64) *RelayKeys {
	k := &RelayKeys{Members: keys, secrets: make(map[uint64][32]byte, len(members))}
	for _, id := range members {
		k.secrets[id] = sha256.Sum256(binary.BigEndian.AppendUint64([]byte("baton sim relay key"), id))
	}
	return k
}

// Signer returns member id's signer of relays, nil if id is not a
// member.
func (k *RelayKeys) Signer(id uint64) certify.Signer {
	secret, ok := k.secrets[id]
	if !ok {
		return nil
	}
	return relaySigner{member: id, secret: secret}
}

// Verify checks a relay's signature with member's relay key, anything
// else with the members' keys.
func (k *RelayKeys) Verify(member uint64, data, sig []byte) error {
	if !isRelay(data) {
		return k.Members.Verify(member, data, sig)
	}
	secret, ok := k.secrets[member]
	if !ok {
		return fmt.Errorf("%w: %d", certify.ErrUnknownMember, member)
	}
	if !bytes.Equal(sig, relayMAC(secret, data)) {
		return fmt.Errorf("%w: member %d: not its relay key's", certify.ErrSignature, member)
	}
	return nil
}

// relaySigner signs member's relays with its relay key.
type relaySigner struct {
	member uint64
	secret [32]byte
}

func (s relaySigner) Member() uint64 { return s.member }

func (s relaySigner) Sign(data []byte) ([]byte, error) {
	if !isRelay(data) {
		return nil, errors.New("sim: a relay key signs relays only")
	}
	return relayMAC(s.secret, data), nil
}

// isRelay reports whether data is an encoded relay statement.
func isRelay(data []byte) bool {
	n := len(certify.Prefix)
	return len(data) > n && string(data[:n]) == certify.Prefix && data[n] == byte(certify.KindRelay)
}

// relayMAC is the signature of data with a relay key: the SHA-256 of the
// key and data, twice, certify.SignatureSize bytes. Within the simulator
// only the member's signer holds its key.
func relayMAC(secret [32]byte, data []byte) []byte {
	h := sha256.New()
	h.Write(secret[:])
	h.Write(data)
	sig := h.Sum(make([]byte, 0, certify.SignatureSize))
	return append(sig, sig...)
}
