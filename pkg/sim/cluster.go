package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Factory builds one node's machine, as the runtime does in production.
type Factory func(election.Config) (election.Machine, error)

// Network is how the simulated network treats each copy of a message.
type Network struct {
	// MinDelay and MaxDelay bound the delay of a copy, in ticks; each copy
	// takes a delay drawn uniformly from [MinDelay, MaxDelay], so copies
	// overtake each other. MinDelay is at least 1.
	MinDelay, MaxDelay int
	// Loss is the probability that a copy is lost.
	Loss float64
	// Duplicate is the probability that a copy is delivered twice (each
	// with its own delay).
	Duplicate float64
	// Unreachable is the probability that the transport tells the sender
	// of a point-to-point copy, one tick after it found the receiver down,
	// that the receiver is unreachable (NATS reports no responders).
	Unreachable float64
}

// Quiet is the network of the quiet phase: no loss, no duplication, delays
// within t_max.
func Quiet(tMax int) Network {
	return Network{MinDelay: 1, MaxDelay: tMax}
}

// Config configures a Cluster.
type Config struct {
	// Members are the IDs of every member, in any order.
	Members []uint64
	// Timing is given to every machine.
	Timing election.Timing
	// Factory builds the machines.
	Factory Factory
	// Rand is the only source of randomness of the cluster.
	Rand *rand.Rand
	// Network is the initial network.
	Network Network
	// Trace, if not nil, receives one line per event.
	Trace io.Writer
}

// MaxInFlight bounds the copies in flight. A cluster of a few nodes never
// needs more than a few hundred; more means the machines multiply messages
// without end, which is reported as a violation.
const MaxInFlight = 5000

// ErrInvariant is wrapped by every invariant violation.
var ErrInvariant = errors.New("sim: invariant violated")

// Cluster is a simulated cluster: the real machines, a fake clock and a
// fake network. It is not safe for concurrent use.
type Cluster struct {
	rng     *rand.Rand
	factory Factory
	members []uint64 // sorted
	timing  election.Timing
	net     Network
	trace   io.Writer

	now    int
	nodes  []*node // in the order of members
	queue  queue
	seq    uint64
	groups map[uint64]int // partition group of each member; all 0 when healed

	claims  map[uint64]uint64 // term → the node that claimed it
	leaders map[uint64]uint64 // term → the node seen in role Leader with it
	err     error
}

type node struct {
	id          uint64
	m           election.Machine // nil while down
	incarnation int
	status      election.Status
}

func (n *node) up() bool { return n.m != nil }

// New returns a cluster whose nodes are all down; Start brings them up.
func New(cfg Config) (*Cluster, error) {
	members := slices.Clone(cfg.Members)
	slices.Sort(members)
	if cfg.Rand == nil || cfg.Factory == nil {
		return nil, errors.New("sim: Rand and Factory are required")
	}
	c := &Cluster{
		rng:     cfg.Rand,
		factory: cfg.Factory,
		members: members,
		timing:  cfg.Timing,
		trace:   cfg.Trace,
		groups:  make(map[uint64]int),
		claims:  make(map[uint64]uint64),
		leaders: make(map[uint64]uint64),
	}
	if err := c.SetNetwork(cfg.Network); err != nil {
		return nil, err
	}
	for _, id := range members {
		c.nodes = append(c.nodes, &node{id: id})
	}
	// Check the configuration once, so that Start cannot fail later.
	if len(members) > 0 {
		if _, err := cfg.Factory(c.config(members[0])); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) config(id uint64) election.Config {
	return election.Config{ID: id, Members: slices.Clone(c.members), Timing: c.timing, Incarnation: uint64(c.node(id).incarnation)}
}

// SetNetwork changes how later copies are treated; copies in flight keep
// their delay.
func (c *Cluster) SetNetwork(n Network) error {
	if n.MinDelay < 1 || n.MaxDelay < n.MinDelay {
		return fmt.Errorf("sim: delays must satisfy 1 <= MinDelay <= MaxDelay: %+v", n)
	}
	c.net = n
	return nil
}

// Members returns the sorted membership.
func (c *Cluster) Members() []uint64 { return slices.Clone(c.members) }

// Now is the current tick.
func (c *Cluster) Now() int { return c.now }

// Err returns the first invariant violation, or nil.
func (c *Cluster) Err() error { return c.err }

// Up reports whether node id is running.
func (c *Cluster) Up(id uint64) bool { return c.node(id).up() }

// Status returns node id's view and whether it is running.
func (c *Cluster) Status(id uint64) (election.Status, bool) {
	n := c.node(id)
	return n.status, n.up()
}

func (c *Cluster) node(id uint64) *node {
	i, ok := slices.BinarySearch(c.members, id)
	if !ok {
		panic(fmt.Sprintf("sim: %d is not a member", id))
	}
	return c.nodes[i]
}

func (c *Cluster) logf(format string, args ...any) {
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%5d  ", c.now)
		fmt.Fprintf(c.trace, format, args...)
		fmt.Fprintln(c.trace)
	}
}

func (c *Cluster) fail(format string, args ...any) {
	err := fmt.Errorf("%w at tick %d: %s", ErrInvariant, c.now, fmt.Sprintf(format, args...))
	c.logf("VIOLATION %v", err)
	if c.err == nil {
		c.err = err
	}
}

// Start brings node id up as a brand-new machine (its state, if it ran
// before, is lost) and calls its Start. A running node is crashed first.
func (c *Cluster) Start(id uint64) {
	n := c.node(id)
	if n.up() {
		c.Crash(id)
	}
	n.incarnation++
	m, err := c.factory(c.config(id))
	if err != nil {
		panic(err) // the configuration was checked in New
	}
	n.m = m
	n.status = m.Status()
	c.logf("start %d (incarnation %d)", id, n.incarnation)
	m.Start()
	c.collect(n)
}

// Crash stops node id at once; copies addressed to it are dropped until it
// starts again.
func (c *Cluster) Crash(id uint64) {
	n := c.node(id)
	if !n.up() {
		return
	}
	n.m = nil
	c.logf("crash %d", id)
}

// Resign makes node id leave cleanly: its machine resigns, its last
// messages are sent, and then the process is gone.
func (c *Cluster) Resign(id uint64) {
	n := c.node(id)
	if !n.up() {
		return
	}
	c.logf("resign %d", id)
	n.m.Resign()
	c.collect(n)
	n.m = nil
}

// Partition splits the network: copies between members of different
// groups are dropped at delivery. Members not named form one more group.
func (c *Cluster) Partition(groups ...[]uint64) {
	for _, id := range c.members {
		c.groups[id] = 0
	}
	for i, g := range groups {
		for _, id := range g {
			c.groups[id] = i + 1
		}
	}
	c.logf("partition %v", groups)
}

// Heal ends every partition.
func (c *Cluster) Heal() {
	for _, id := range c.members {
		c.groups[id] = 0
	}
	c.logf("heal")
}

// Run advances the clock by ticks ticks.
func (c *Cluster) Run(ticks int) {
	for range ticks {
		c.Tick()
	}
}

// Tick advances the clock by one tick: it delivers every copy due, in the
// order they were sent, and then ticks every running node in ID order.
func (c *Cluster) Tick() {
	c.now++
	for len(c.queue) > 0 && c.queue[0].at <= c.now {
		c.handle(heap.Pop(&c.queue).(*event))
	}
	for _, n := range c.nodes {
		if n.up() {
			n.m.Tick()
			c.collect(n)
		}
	}
}

// Agreement reports whether the cluster agrees on the highest running ID as
// leader: every running node follows it with the same term, it is in role
// Leader, and no other node is. It returns that leader and term.
func (c *Cluster) Agreement() (leader, term uint64, ok bool) {
	var top *node
	for _, n := range c.nodes {
		if n.up() {
			top = n
		}
	}
	if top == nil || top.status.Role != election.Leader || top.status.Leader != top.id {
		return 0, 0, false
	}
	leader, term = top.id, top.status.Term
	for _, n := range c.nodes {
		if !n.up() || n == top {
			continue
		}
		if n.status.Leader != leader || n.status.Term != term || n.status.Role == election.Leader {
			return leader, term, false
		}
	}
	return leader, term, true
}

type eventKind int

const (
	deliver eventKind = iota
	unreachable
)

type event struct {
	at   int
	seq  uint64
	kind eventKind
	to   uint64           // receiver of a copy, or node told of an unreachable peer
	msg  protocol.Message // the copy; for unreachable, msg.To is the peer
	inc  int              // for unreachable: the incarnation of the node told
}

// handle delivers a copy or an unreachable notice.
func (c *Cluster) handle(e *event) {
	n := c.node(e.to)
	if e.kind == unreachable {
		if n.up() && n.incarnation == e.inc {
			c.logf("unreachable %d told to %d", e.msg.To, e.to)
			n.m.Unreachable(e.msg.To)
			c.collect(n)
		}
		return
	}
	switch {
	case !n.up():
		c.logf("drop %v at %d: down", e.msg, e.to)
		if e.msg.To != 0 && c.rng.Float64() < c.net.Unreachable {
			sender := c.node(e.msg.From)
			if sender.up() {
				c.push(&event{at: c.now + 1, kind: unreachable, to: sender.id, msg: e.msg, inc: sender.incarnation})
			}
		}
	case c.groups[e.msg.From] != c.groups[e.to]:
		c.logf("drop %v at %d: partitioned", e.msg, e.to)
	default:
		c.logf("deliver %v hops=%d at %d", e.msg, e.msg.Hops, e.to)
		n.m.Step(e.msg)
		c.collect(n)
	}
}

func (c *Cluster) push(e *event) {
	if len(c.queue) >= MaxInFlight {
		if len(c.queue) == MaxInFlight {
			c.fail("more than %d copies in flight: a message storm", MaxInFlight)
		}
		return
	}
	c.seq++
	e.seq = c.seq
	heap.Push(&c.queue, e)
}

// send puts the copies of m for receiver to on the network.
func (c *Cluster) send(m protocol.Message, to uint64) {
	if c.rng.Float64() < c.net.Loss {
		c.logf("lose %v to %d", m, to)
		return
	}
	copies := 1
	if c.rng.Float64() < c.net.Duplicate {
		copies = 2
	}
	for range copies {
		delay := c.net.MinDelay + c.rng.IntN(c.net.MaxDelay-c.net.MinDelay+1)
		c.push(&event{at: c.now + delay, kind: deliver, to: to, msg: m})
	}
}

// collect takes what node n wants done, sends its messages, and checks the
// invariants that n's step could have broken.
func (c *Cluster) collect(n *node) {
	rd := n.m.Ready()
	st := n.m.Status()
	for _, m := range rd.Messages {
		m.Inc = uint64(n.incarnation) // as the runtime stamps it
		if m.From != n.id {
			c.fail("node %d sent a message as %d: %v", n.id, m.From, m)
			continue
		}
		if err := protocol.Validate(m, c.members); err != nil {
			c.fail("node %d sent an invalid message %v: %v", n.id, m, err)
			continue
		}
		if m.To != 0 {
			c.send(m, m.To)
			continue
		}
		for _, id := range c.members {
			if id != n.id {
				c.send(m, id)
			}
		}
	}
	if rd.Claimed != 0 {
		c.logf("claim %d term %d", n.id, rd.Claimed)
		if prev, ok := c.claims[rd.Claimed]; ok && prev != n.id {
			c.fail("term %d claimed by %d and by %d", rd.Claimed, prev, n.id)
		}
		c.claims[rd.Claimed] = n.id
		if st.Role != election.Leader || st.Term != rd.Claimed {
			c.fail("node %d claimed term %d but its status is %v term %d", n.id, rd.Claimed, st.Role, st.Term)
		}
	}
	if st != n.status {
		c.logf("status %d: %v leader=%d term=%d", n.id, st.Role, st.Leader, st.Term)
	}
	if st.ID != n.id {
		c.fail("node %d reports ID %d", n.id, st.ID)
	}
	if st.Term < n.status.Term {
		c.fail("node %d: term went back from %d to %d", n.id, n.status.Term, st.Term)
	}
	if st.Leader != 0 {
		if _, ok := slices.BinarySearch(c.members, st.Leader); !ok {
			c.fail("node %d: leader %d is not a member", n.id, st.Leader)
		}
	}
	if st.Role == election.Leader {
		if st.Leader != n.id {
			c.fail("node %d is in role leader but follows %d", n.id, st.Leader)
		}
		if prev, ok := c.leaders[st.Term]; ok && prev != n.id {
			c.fail("nodes %d and %d both led with term %d", prev, n.id, st.Term)
		}
		c.leaders[st.Term] = n.id
	}
	n.status = st
}

// queue orders events by due tick, then by the order they were sent.
type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
