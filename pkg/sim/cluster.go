package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Factory builds one node's machine.
type Factory func(election.Config) (election.Machine, error)

// Network is how the simulated network treats each copy of a message.
type Network struct {
	// MinDelay and MaxDelay bound the delay of a copy, in ticks; each copy
	// takes a delay drawn uniformly from [MinDelay, MaxDelay], so copies
	// overtake each other. MinDelay is at least 1.
	MinDelay, MaxDelay int
	// Long is the probability that a copy is delayed far beyond MaxDelay
	// instead, by up to LongDelay ticks (a congested link, a stalled
	// server).
	Long      float64
	LongDelay int
	// Loss is the probability that a copy is lost.
	Loss float64
	// Duplicate is the probability that a copy is delivered twice (each
	// with its own delay).
	Duplicate float64
	// Unreachable is the probability that the transport tells the sender
	// of a point-to-point copy, one tick after it found the receiver down,
	// that the receiver is unreachable (NATS reports no responders).
	Unreachable float64
	// Events is the probability that a node that crashes or leaves is
	// reported down (PeerDown), one tick later, to each running node on
	// its side of the network (NATS connection events).
	Events float64
	// Extra is added to the delay of every copy of an election message,
	// whoever sends it: congestion that makes every message late and
	// loses none. Set with Cluster.SetNetwork for a window of ticks, it is
	// a delay burst. The orders' copies (EnableOrders) ignore it.
	Extra int
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
	// Leases says the algorithm keeps leaders exclusive in time with
	// leases (Paxos): the cluster then also checks that at no instant do
	// two nodes report leader (a node reports leader while its status says
	// so and its own clock has not reached its LeaseUntil), and that a
	// node claims only with a majority on its side of a partition.
	Leases bool
	// Rates are the rates of the nodes' clocks, in parts per million of
	// real time (1_000_000 runs true); a node not listed runs true.
	Rates map[uint64]int64
	// Rand is the only source of randomness of the cluster.
	Rand *rand.Rand
	// Network is the initial network.
	Network Network
	// Trace, if not nil, receives one line per event.
	Trace io.Writer
	// Keys, if not nil, are the members' public keys of an algorithm that
	// certifies its leaders (byzantine): the cluster then checks every
	// certificate it sees, on the network (sent or injected) and held by
	// a machine (Certified), and fails if two valid ones name different
	// leaders in one term.
	Keys certify.Members
	// Traitors are the members that lie (they never run here: they speak
	// through Inject). A running member that reports another member lied
	// (election.MemberLied) must name one of them.
	Traitors []uint64
	// Dynamic makes the membership dynamic (election.Config.Dynamic):
	// Members are then every ID that may ever run (each
	// protocol.DynamicMember), not a membership the machines share. A
	// machine is configured with the members it knows at start: Initial
	// at the first start of a member of Initial, itself alone at every
	// other start (a node of the runtime with dynamic membership knows
	// only itself). A broadcast reaches the nodes that run (paused or
	// not) when it is sent; every message must pass protocol.ValidateFor
	// with protocol.DynamicMember, and a node's leader must be 0 or an ID
	// that has run.
	Dynamic bool
	// Initial are the members known at start, with Dynamic.
	Initial []uint64
	// KeepLeader is given to every machine with Dynamic
	// (election.Config.KeepLeader).
	KeepLeader bool
	// Rank is given to every machine (election.Config.Rank); Agreement
	// and Highest rank the nodes by it. The zero value ranks by ID.
	Rank election.Rank
}

// ppm is one tick of a node's clock, in the units of Config.Rates.
const ppm = 1_000_000

// The nodes' machines are driven by pkg/driver, the runtime's driver,
// whose times are time.Time: a node's clock, in ppm of a tick, is read as
// nanoseconds after epoch, so that one tick of the driver (tick) is ppm
// nanoseconds. The wall time that dates the messages is wallTick per tick
// of real time after epoch.
const (
	tick     = time.Duration(ppm)
	wallTick = 10 * time.Millisecond
)

var epoch = time.Unix(1_800_000_000, 0)

// The runtime's limits on what waits for a node, as the simulator models
// them: a paused node's queue holds at most MaxBacklog copies (the
// subscriptions' pending limits; later copies are dropped), and a copy
// delivered more than MaxAge ticks after it was sent is dropped as
// expired (ELECTION_MAX_MESSAGE_AGE, 2 s of 10 ms ticks).
const (
	MaxBacklog = 1024
	MaxAge     = 200
)

// MaxInFlight bounds the copies in flight for n members. A cluster never
// needs more than a few rounds of broadcasts to every member in flight at
// once; more means the machines multiply messages without end, which is
// reported as a violation.
func MaxInFlight(n int) int { return 5000 + 20*n*n }

// ErrInvariant is wrapped by every invariant violation.
var ErrInvariant = errors.New("sim: invariant violated")

// Cluster is a simulated cluster: the real machines, fake clocks, fake
// disks and a fake network. It is not safe for concurrent use.
type Cluster struct {
	rng     *rand.Rand
	factory Factory
	members []uint64 // sorted
	timing  election.Timing
	rank    *election.Ranker // Config.Rank
	leases  bool
	dynamic bool     // Config.Dynamic
	keep    bool     // Config.KeepLeader
	initial []uint64 // Config.Initial, sorted
	net     Network
	trace   io.Writer
	limit   int // MaxInFlight

	now    int
	nodes  []*node // in the order of members
	queue  queue
	seq    uint64
	groups map[uint64]int // partition group of each member; all 0 when healed
	split  int            // tick the current partition started, -1 when healed

	announced   uint64            // the last term announced: what the stream keeps
	claims      map[uint64]uint64 // term → the node that claimed it, across incarnations
	maxClaim    uint64
	leaders     map[uint64]uint64 // term → the node seen in role Leader with it
	published   int               // messages the machines sent (a broadcast counts once)
	delivered   int               // copies handed to a machine
	elections   int               // elections the machines reported starting
	reclaims    int               // terms claimed again by a node that lost its disk since (Reclaims)
	backlog     int               // copies handed to nodes when they resumed
	err         error
	tap         func(to uint64, m protocol.Message) // sees copies for nodes that are down (Tap)
	traitors    []uint64                            // sorted
	convictions int                                 // MemberLied events reported
	beforeTick  func()                              // BeforeTick's
	// checks are told what the nodes do, in this order (check): the
	// certificates' (Config.Keys) and the orders' (orders), when there
	// are.
	checks []check
	orders *orderBook // nil unless EnableOrders; among checks

	onDeliver func(to uint64, m protocol.Message, arrived int) // OnDeliver's
}

type node struct {
	id          uint64
	m           election.Machine // nil while down
	d           *driver.Driver   // drives m; nil while down
	incarnation int
	status      election.SoftState
	rate        int64 // clock rate, ppm
	clock       int64 // this incarnation's clock, in ppm, advanced in real time
	paused      bool
	backlog     []*event // copies that arrived while paused
	disk        *election.HardState
	floor       uint64 // the term on its disk when it started
	prepared    int    // tick it last sent a Paxos Prepare
	sendDelay   int    // extra ticks of delay of every copy it sends (SetSendDelay)
	claimed     uint64 // the highest term it claimed, in any incarnation since its disk was last lost
	forgot      uint64 // the highest term it claimed before its disk was last lost
	// quiet is how many of its next ticks its machine said could have no
	// effect (Due()-1): the runtime sleeps through them, so a tick among
	// them that does something is a violation.
	quiet int
	// held are, with dynamic voters (voting), the voter configurations
	// its machine held since its last Prepare, that one's included: a
	// claim counts promises and acceptances under one of them.
	held []*protocol.Voters
}

func (n *node) up() bool { return n.m != nil }

// time is n's clock as the driver reads it.
func (n *node) time() time.Time { return epoch.Add(time.Duration(n.clock)) }

// reports is whether n reports itself leader now: its status says so and,
// with a lease, its own clock has not reached the lease's end.
func (n *node) reports() bool {
	if !n.up() || n.status.Role != election.Leader {
		return false
	}
	return n.status.LeaseUntil == 0 || n.clock/ppm < int64(n.status.LeaseUntil)
}

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
		rank:    cfg.Rank.Ranker(members),
		leases:  cfg.Leases,
		trace:   cfg.Trace,
		limit:   MaxInFlight(len(members)),
		groups:  make(map[uint64]int),
		split:   -1,
		claims:  make(map[uint64]uint64),
		leaders: make(map[uint64]uint64),
		dynamic: cfg.Dynamic,
		keep:    cfg.KeepLeader,
		initial: slices.Sorted(slices.Values(cfg.Initial)),
	}
	if cfg.Dynamic {
		for _, id := range members {
			if !protocol.DynamicMember(id) {
				return nil, fmt.Errorf("sim: %d cannot be a member of a cluster with dynamic membership", id)
			}
		}
		for _, id := range c.initial {
			if _, ok := slices.BinarySearch(members, id); !ok {
				return nil, fmt.Errorf("sim: initial member %d is not a member", id)
			}
		}
	} else if len(cfg.Initial) > 0 || cfg.KeepLeader {
		return nil, errors.New("sim: Initial and KeepLeader need Dynamic")
	}
	if cfg.Keys != nil {
		c.checks = append(c.checks, newCertChecker(c, cfg.Keys))
	}
	c.traitors = slices.Sorted(slices.Values(cfg.Traitors))
	for _, id := range c.traitors {
		if _, ok := slices.BinarySearch(members, id); !ok {
			return nil, fmt.Errorf("sim: traitor %d is not a member", id)
		}
	}
	if err := c.SetNetwork(cfg.Network); err != nil {
		return nil, err
	}
	for _, id := range members {
		rate := int64(ppm)
		if r, ok := cfg.Rates[id]; ok {
			rate = r
		}
		if rate <= 0 {
			return nil, fmt.Errorf("sim: clock rate of %d must be positive, got %d", id, rate)
		}
		c.nodes = append(c.nodes, &node{id: id, rate: rate})
	}
	// Check the configuration once, so that Start cannot fail later.
	if len(members) > 0 {
		if _, err := cfg.Factory(c.config(c.nodes[0])); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// config is the configuration of n's next incarnation: its disk, raised by
// the term of the last announcement (the runtime reads it from the stream
// before it starts the machine).
func (c *Cluster) config(n *node) election.Config {
	cfg := election.Config{ID: n.id, Members: slices.Clone(c.members), Timing: c.timing, Incarnation: uint64(n.incarnation), Rank: c.rank.Rank()}
	if c.dynamic {
		cfg.Dynamic, cfg.KeepLeader, cfg.Members = true, c.keep, []uint64{n.id}
		if _, ok := slices.BinarySearch(c.initial, n.id); ok && n.incarnation <= 1 {
			cfg.Members = slices.Clone(c.initial)
		}
	}
	if n.disk != nil {
		cfg.State, cfg.Restored = *n.disk, true
	}
	cfg.State.MaxTerm = max(cfg.State.MaxTerm, c.announced)
	return cfg
}

// query is what node n finds when it asks for the leader as it starts (the
// runtime's query): the leadership of a node on its side of the network
// that reports itself leader, if a copy of the question and of the answer
// are not lost; with several, the first to answer, at random.
func (c *Cluster) query(n *node) election.Leadership {
	var found []election.Leadership
	for _, o := range c.nodes {
		if o != n && o.reports() && !o.paused && c.groups[o.id] == c.groups[n.id] {
			found = append(found, election.Leadership{Leader: o.id, Term: o.status.Term})
		}
	}
	if len(found) == 0 || c.rng.Float64() < 1-(1-c.net.Loss)*(1-c.net.Loss) {
		return election.Leadership{}
	}
	return found[c.rng.IntN(len(found))]
}

// SetNetwork changes how later copies are treated; copies in flight keep
// their delay.
func (c *Cluster) SetNetwork(n Network) error {
	if n.MinDelay < 1 || n.MaxDelay < n.MinDelay || (n.Long > 0 && n.LongDelay < n.MaxDelay) {
		return fmt.Errorf("sim: delays must satisfy 1 <= MinDelay <= MaxDelay <= LongDelay: %+v", n)
	}
	if n.Extra < 0 {
		return fmt.Errorf("sim: the extra delay must not be negative: %+v", n)
	}
	c.net = n
	return nil
}

// Members returns the sorted membership.
func (c *Cluster) Members() []uint64 { return slices.Clone(c.members) }

// Now is the current tick of real time.
func (c *Cluster) Now() int { return c.now }

// Err returns the first invariant violation, or nil.
func (c *Cluster) Err() error { return c.err }

// Up reports whether node id is running (paused or not).
func (c *Cluster) Up(id uint64) bool { return c.node(id).up() }

// Paused reports whether node id is paused.
func (c *Cluster) Paused(id uint64) bool { return c.node(id).paused }

// Status returns node id's view and whether it is running.
func (c *Cluster) Status(id uint64) (election.SoftState, bool) {
	n := c.node(id)
	return n.status, n.up()
}

// Messages returns how many election messages the machines have sent (a
// broadcast counts once) and how many copies of them they have been
// handed; the steady traffic of a quiet cluster (protocol.Steady) is not
// counted.
func (c *Cluster) Messages() (published, delivered int) { return c.published, c.delivered }

// MaxClaimedByRunning is the highest term claimed, in any incarnation, by
// a node that runs now: what the survivors' disks keep of the past (a
// node whose disk was lost keeps nothing of the claims before).
func (c *Cluster) MaxClaimedByRunning() uint64 {
	var top uint64
	for _, n := range c.nodes {
		if n.up() {
			top = max(top, n.claimed)
		}
	}
	return top
}

// Backlog is how many copies nodes found waiting when they resumed from a
// pause.
func (c *Cluster) Backlog() int { return c.backlog }

// InFlight is how many copies are on the network now.
func (c *Cluster) InFlight() int { return len(c.queue) }

// Claims is how many terms have been claimed.
func (c *Cluster) Claims() int { return len(c.claims) }

// Elections is how many elections the machines have reported starting
// (election.ElectionStarted), every node counted.
func (c *Cluster) Elections() int { return c.elections }

// Reclaims is how many times a node claimed again a term it claimed
// before it lost its disk (WipeDisk). That is not a violation: a node
// without data knows its cluster's terms from the last announcement
// and the live leader's answer alone, and when announcements of two
// sides of a partition came out of order the last is below its old
// claim. Every other term claimed twice is.
func (c *Cluster) Reclaims() int { return c.reclaims }

// MaxClaimed is the highest term ever claimed.
func (c *Cluster) MaxClaimed() uint64 { return c.maxClaim }

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

// Start brings node id up as a brand-new machine that restarts from its
// disk (its other state, if it ran before, is lost) and calls its Start.
// A running node is crashed first.
func (c *Cluster) Start(id uint64) {
	n := c.node(id)
	if _, traitor := slices.BinarySearch(c.traitors, id); traitor {
		panic(fmt.Sprintf("sim: %d is a traitor: it does not run here", id))
	}
	if n.up() {
		c.Crash(id)
	}
	n.incarnation++
	cfg := c.config(n)
	cfg.Found = c.query(n)
	m, err := c.factory(cfg)
	if err != nil {
		panic(err) // the configuration was checked in New
	}
	d, err := driver.New(m, driver.Config{Tick: tick, Incarnation: uint64(n.incarnation), Observe: func(s driver.Step) { c.observe(n, s) }})
	if err != nil {
		panic(err) // a machine, a positive tick and incarnation
	}
	n.m, n.d, n.clock, n.paused, n.backlog = m, d, 0, false, nil
	n.floor, n.held = cfg.State.Term, nil
	n.status = m.Status()
	c.logf("start %d (incarnation %d, from term %d max %d)", id, n.incarnation, cfg.State.Term, cfg.State.MaxTerm)
	for _, k := range c.checks {
		k.started(n)
	}
	d.Start(n.time())
	c.flush(n)
}

// Crash stops node id at once; copies addressed to it are dropped until it
// starts again. Its disk keeps what it stored.
func (c *Cluster) Crash(id uint64) {
	n := c.node(id)
	if !n.up() {
		return
	}
	n.m, n.d, n.paused, n.backlog = nil, nil, false, nil
	c.logf("crash %d", id)
	for _, k := range c.checks {
		k.stopped(n)
	}
	c.reportDown(id)
}

// reportDown tells, with probability Events each, the running nodes on
// id's side of the network that id's connection closed.
func (c *Cluster) reportDown(id uint64) {
	for _, o := range c.nodes {
		if o.id != id && o.up() && c.groups[o.id] == c.groups[id] && c.rng.Float64() < c.net.Events {
			c.push(&event{at: c.now + 1, sent: c.now, kind: down, to: o.id, msg: protocol.Message{To: id}, inc: o.incarnation})
		}
	}
}

// WipeDisk loses what node id stored, as a replacement in a new container
// would; it takes effect at its next Start.
func (c *Cluster) WipeDisk(id uint64) {
	n := c.node(id)
	n.disk = nil
	n.forgot, n.claimed = max(n.forgot, n.claimed), 0
	for _, k := range c.checks {
		k.wiped(n)
	}
	c.logf("wipe the disk of %d", id)
}

// Pause stops node id without losing anything: it gets no ticks and
// handles no copies, which queue up, until Resume. Its clock goes on.
func (c *Cluster) Pause(id uint64) {
	n := c.node(id)
	if n.up() && !n.paused {
		n.paused = true
		c.logf("pause %d", id)
		for _, k := range c.checks {
			k.disturbed(n)
		}
	}
}

// Resume resumes a paused node as its runtime would: first the ticks of
// its clock that passed while it was paused, then the copies that arrived
// meanwhile, in order.
func (c *Cluster) Resume(id uint64) {
	n := c.node(id)
	if !n.paused {
		return
	}
	n.paused = false
	c.logf("resume %d with %d copies waiting", id, len(n.backlog))
	c.tickNode(n)
	backlog := n.backlog
	n.backlog = nil
	c.backlog += len(backlog)
	for _, e := range backlog {
		if !n.up() || n.paused {
			return
		}
		c.deliverTo(n, e)
	}
	for _, k := range c.checks {
		k.resumed(n)
	}
}

// ResumeSettling resumes a paused node whose machine's deadline came
// while it was descheduled and the copies that arrived meanwhile wait
// unread in its socket (the node's settle, driver.Settle): a node that
// does not lead gets the ticks before its deadline's, then those copies,
// in order, each with the tick of its own clock in which it arrived
// (election.StepAt), then the rest of its ticks. A leader, or a node
// whose deadline has not come or that has nothing waiting, resumes as
// with Resume. It reports whether the node settled.
func (c *Cluster) ResumeSettling(id uint64) bool {
	n := c.node(id)
	if !n.paused {
		return false
	}
	deadline := n.d.Deadline()
	if n.status.Role == election.Leader || len(n.backlog) == 0 || int64(deadline) > n.clock/ppm {
		c.Resume(id)
		return false
	}
	n.paused = false
	c.logf("resume %d past its deadline (tick %d of its clock, now %d), settling %d copies first", id, deadline, n.clock/ppm, len(n.backlog))
	n.d.Settle()
	c.flush(n)
	backlog := n.backlog
	n.backlog = nil
	c.backlog += len(backlog)
	for _, e := range backlog {
		if !n.up() || n.paused {
			return true
		}
		c.deliverTo(n, e)
	}
	c.tickNode(n)
	for _, k := range c.checks {
		k.resumed(n)
	}
	return true
}

// Resign makes node id leave cleanly: its machine resigns, its last
// messages are sent, and then the process is gone.
func (c *Cluster) Resign(id uint64) {
	n := c.node(id)
	if !n.up() || n.paused {
		return
	}
	c.logf("resign %d", id)
	n.d.Resign()
	c.flush(n)
	n.m, n.d = nil, nil
	for _, k := range c.checks {
		k.stopped(n)
	}
	c.reportDown(id)
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
	c.split = c.now
	c.logf("partition %v", groups)
	for _, n := range c.nodes {
		for _, k := range c.checks {
			k.disturbed(n)
		}
	}
}

// Heal ends every partition.
func (c *Cluster) Heal() {
	for _, id := range c.members {
		c.groups[id] = 0
	}
	c.split = -1
	c.logf("heal")
}

// Run advances the clock by ticks ticks.
func (c *Cluster) Run(ticks int) {
	for range ticks {
		c.Tick()
	}
}

// Tick advances real time by one tick: it advances every running node's
// clock by its rate, in ID order, giving its machine the ticks it
// completed, and then delivers every copy due, in the order they were
// sent. So a machine gets the ticks due before a message arrives before
// the message.
func (c *Cluster) Tick() {
	if c.beforeTick != nil {
		c.beforeTick()
	}
	c.now++
	for _, n := range c.nodes {
		if !n.up() {
			continue
		}
		n.clock += n.rate
		if !n.paused {
			c.tickNode(n)
		}
	}
	for len(c.queue) > 0 && c.queue[0].at <= c.now {
		c.handle(heap.Pop(&c.queue).(*event))
	}
	for _, k := range c.checks {
		k.ticked()
	}
	c.checkExclusive()
}

// SetSendDelay adds extra ticks to the delay of every copy node id sends
// from now on (0: none), beside the network's: a node that runs, and
// whose messages are late all the same (a slow host, a congested
// uplink). Copies in flight keep their delay. It draws nothing from
// Config.Rand: the same copies take the same network delays as without
// it, only later.
func (c *Cluster) SetSendDelay(id uint64, extra int) {
	if extra < 0 {
		panic(fmt.Sprintf("sim: negative send delay %d for %d", extra, id))
	}
	n := c.node(id)
	if n.sendDelay != extra {
		n.sendDelay = extra
		c.logf("send delay of %d: %d ticks more", id, extra)
	}
}

// OnDeliver sets fn to see every copy of an election message handed to a
// running machine (nil: none), before the machine handles it: to is its
// receiver, arrived the tick of real time at which it reached to, which
// for a node that was paused is when it joined its queue, not the later
// tick it was handed over. Copies dropped (lost, partitioned, for a node
// that is down, past a full queue, or expired: older than MaxAge when
// handed over) are not seen. A test measures with it how long a node
// heard nothing from another.
func (c *Cluster) OnDeliver(fn func(to uint64, m protocol.Message, arrived int)) { c.onDeliver = fn }

// BeforeTick sets fn to run at the start of every Tick, before time
// passes (nil: none): a run's drivers of what does not run here, such as
// the traitors' lies about orders and the leaders' orders.
func (c *Cluster) BeforeTick(fn func()) { c.beforeTick = fn }

// tickNode gives n's machine every tick its clock has completed
// (driver.Advance: after a stall, the messages of ticks more than
// election.StaleTicks before the last do not leave).
func (c *Cluster) tickNode(n *node) {
	if n.up() && !n.paused {
		n.d.Advance(n.time())
		c.flush(n)
		for _, k := range c.checks {
			k.advanced(n)
		}
	}
}

// Agreement reports whether the cluster agrees on the highest-ranked
// running node (Config.Rank: the highest running ID by default) as
// leader: every running node follows it with the same term, it is in role
// Leader, and no other node is. It returns that leader and term.
func (c *Cluster) Agreement() (leader, term uint64, ok bool) {
	var top *node
	for _, n := range c.nodes {
		if n.up() && (top == nil || c.rank.Above(n.id, top.id)) {
			top = n
		}
	}
	if top == nil || !top.reports() || top.status.Leader != top.id {
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

// Leading reports whether the running nodes agree on one leader, whichever
// it is: it runs and reports leader, every other running node follows it
// with its term, and no other is in role Leader. With Config.KeepLeader the
// leader need not be the highest running ID (see Agreement).
func (c *Cluster) Leading() (leader, term uint64, ok bool) {
	var lead *node
	for _, n := range c.nodes {
		if n.up() && n.status.Role == election.Leader {
			if lead != nil {
				return 0, 0, false
			}
			lead = n
		}
	}
	if lead == nil || !lead.reports() || lead.status.Leader != lead.id {
		return 0, 0, false
	}
	leader, term = lead.id, lead.status.Term
	for _, n := range c.nodes {
		if n.up() && n != lead && (n.status.Leader != leader || n.status.Term != term) {
			return leader, term, false
		}
	}
	return leader, term, true
}

// Highest returns the highest-ranked of ids (Config.Rank), 0 if none.
func (c *Cluster) Highest(ids []uint64) uint64 { return c.rank.Highest(ids) }

// highestName names the highest node of an agreement in messages: "ID",
// or for a rank by Spread the member that ranks highest.
func (c *Cluster) highestName() string {
	if c.rank.Rank().IsSpread() {
		return "member by rank"
	}
	return "ID"
}

// Rank is the rank of the cluster's machines (Config.Rank).
func (c *Cluster) Rank() election.Rank { return c.rank.Rank() }

// Running returns the IDs of the nodes that run (paused or not), sorted.
func (c *Cluster) Running() []uint64 {
	var ids []uint64
	for _, n := range c.nodes {
		if n.up() {
			ids = append(ids, n.id)
		}
	}
	return ids
}

// MembersOf returns the members node id's machine counts as present
// (election.Membership), and whether it runs and implements it.
func (c *Cluster) MembersOf(id uint64) ([]uint64, bool) {
	n := c.node(id)
	if mm, ok := n.m.(election.Membership); ok && n.up() {
		return slices.Clone(mm.Members()), true
	}
	return nil, false
}

// A check watches what a cluster's nodes do, beside the invariants the
// cluster checks itself, and may keep state of its own per node: the
// certificates of an algorithm that certifies its leaders (certChecker,
// Config.Keys), the agreement on the orders that runs beside the
// machines (orderBook, EnableOrders). The cluster tells each of its
// checks, in the order they were added, of every one of these moments;
// a check embeds noCheck and implements the ones it needs.
type check interface {
	// started: node n's new machine is built; its Start follows.
	started(n *node)
	// stopped: node n crashed or resigned; its machine is gone.
	stopped(n *node)
	// disturbed: node n was paused, or a partition began.
	disturbed(n *node)
	// resumed: node n resumed and handled the copies that waited.
	resumed(n *node)
	// wiped: node n lost its disk.
	wiped(n *node)
	// advanced: node n's machine was given the ticks of its clock.
	advanced(n *node)
	// sent: m goes on the network, sent by node from or injected as it
	// (how says which).
	sent(m protocol.Message, how string, from uint64)
	// stepped: a step of node n's machine passed the cluster's checks of
	// its events; its claim and status are checked next.
	stepped(n *node, s driver.Step)
	// status: node n shows st after a step, before the cluster keeps it.
	status(n *node, st election.SoftState)
	// ticked: a tick of real time delivered every election copy due.
	ticked()
}

// noCheck is a check that does nothing, for the others to embed.
type noCheck struct{}

func (noCheck) started(*node)                         {}
func (noCheck) stopped(*node)                         {}
func (noCheck) disturbed(*node)                       {}
func (noCheck) resumed(*node)                         {}
func (noCheck) wiped(*node)                           {}
func (noCheck) advanced(*node)                        {}
func (noCheck) sent(protocol.Message, string, uint64) {}
func (noCheck) stepped(*node, driver.Step)            {}
func (noCheck) status(*node, election.SoftState)      {}
func (noCheck) ticked()                               {}

type eventKind int

const (
	deliver eventKind = iota
	unreachable
	down
)

type event struct {
	at   int
	sent int
	seq  uint64
	kind eventKind
	to   uint64           // receiver of a copy, or node told of an unreachable or down peer
	msg  protocol.Message // the copy; for unreachable and down, msg.To is the peer
	inc  int              // for unreachable and down: the incarnation of the node told
	// arrived is the time of the receiver's clock at which the copy
	// reached it (the runtime's time of arrival): what is measured from
	// the arrival is measured from there, even when the copy is handed
	// over before ticks that fell due earlier (ResumeSettling).
	arrived time.Time
	// reached is the tick of real time at which the copy reached the
	// receiver: when it was handed over, or queued while it was paused.
	reached int
}

// handle delivers a copy or an unreachable notice.
func (c *Cluster) handle(e *event) {
	n := c.node(e.to)
	switch e.kind {
	case unreachable:
		if n.up() && !n.paused && n.incarnation == e.inc {
			c.logf("unreachable %d told to %d", e.msg.To, e.to)
			n.d.Unreachable(e.msg.To)
			c.flush(n)
		}
		return
	case down:
		if n.up() && !n.paused && n.incarnation == e.inc {
			c.logf("down %d told to %d", e.msg.To, e.to)
			n.d.PeerDown(e.msg.To)
			c.flush(n)
		}
		return
	}
	switch {
	case !n.up():
		c.logf("drop %v at %d: down", e.msg, e.to)
		if c.tap != nil && c.groups[e.msg.From] == c.groups[e.to] {
			c.tap(e.to, e.msg)
		}
		if e.msg.To != 0 && c.rng.Float64() < c.net.Unreachable {
			sender := c.node(e.msg.From)
			if sender.up() {
				c.push(&event{at: c.now + 1, kind: unreachable, to: sender.id, msg: e.msg, inc: sender.incarnation})
			}
		}
	case c.groups[e.msg.From] != c.groups[e.to]:
		c.logf("drop %v at %d: partitioned", e.msg, e.to)
	case n.paused:
		e.arrived, e.reached = n.time(), c.now
		if len(n.backlog) < MaxBacklog {
			n.backlog = append(n.backlog, e)
		} else {
			c.logf("drop %v at %d: its queue is full", e.msg, e.to)
		}
	default:
		e.arrived, e.reached = n.time(), c.now
		c.deliverTo(n, e)
	}
}

func (c *Cluster) deliverTo(n *node, e *event) {
	if c.now-e.sent > MaxAge {
		c.logf("drop %v at %d: expired", e.msg, n.id)
		return
	}
	c.logf("deliver %v hops=%d at %d", e.msg, e.msg.Hops, n.id)
	if !protocol.Steady(e.msg) {
		c.delivered++
	}
	if c.onDeliver != nil {
		c.onDeliver(n.id, e.msg, e.reached)
	}
	n.d.Step(e.msg, e.arrived)
	c.flush(n)
}

func (c *Cluster) push(e *event) {
	if len(c.queue) >= c.limit {
		if len(c.queue) == c.limit {
			c.fail("more than %d copies in flight: a message storm", c.limit)
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
		if c.net.Long > 0 && c.rng.Float64() < c.net.Long {
			delay = c.net.MaxDelay + 1 + c.rng.IntN(c.net.LongDelay-c.net.MaxDelay)
		}
		delay += c.net.Extra + c.node(m.From).sendDelay
		c.push(&event{at: c.now + delay, sent: c.now, kind: deliver, to: to, msg: m})
	}
}

// quorum is a majority of the members.
func (c *Cluster) quorum() int { return len(c.members)/2 + 1 }

// side is how many members are on id's side of the current partition.
func (c *Cluster) side(id uint64) int {
	k := 0
	for _, m := range c.members {
		if c.groups[m] == c.groups[id] {
			k++
		}
	}
	return k
}

// flush carries out what node n's driver says: it stores the hard state
// on n's disk before it sends the messages, as driver.Ready prescribes
// (the steps were checked one by one in observe).
func (c *Cluster) flush(n *node) {
	if !n.d.HasReady() {
		return
	}
	rd := n.d.Ready(epoch.Add(time.Duration(c.now) * wallTick))
	if rd.State != nil {
		disk := *rd.State
		n.disk = &disk
	}
	for _, m := range rd.Stale {
		c.logf("not sent, out of date after a stall: %v", m)
	}
	for _, m := range rd.Messages {
		if m.From != n.id {
			c.fail("node %d sent a message as %d: %v", n.id, m.From, m)
			continue
		}
		if err := c.validate(m); err != nil {
			c.fail("node %d sent an invalid message %v: %v", n.id, m, err)
			continue
		}
		if !protocol.Steady(m) {
			c.published++
		}
		for _, k := range c.checks {
			k.sent(m, "sent by", n.id)
		}
		if m.To != 0 {
			c.send(m, m.To)
			continue
		}
		c.broadcast(m)
	}
}

// validate checks a message as its receivers would: against the
// membership, or with dynamic membership against the IDs a member may
// have (protocol.DynamicMember), its receiver an initial member or an ID
// that has run.
func (c *Cluster) validate(m protocol.Message) error {
	if !c.dynamic {
		return protocol.Validate(m, c.members)
	}
	if err := protocol.ValidateFor(m, protocol.DynamicMember); err != nil {
		return err
	}
	if _, known := slices.BinarySearch(c.initial, m.To); m.To != 0 && !known && !c.ran(m.To) {
		return fmt.Errorf("sim: to %d, which never ran and is not an initial member", m.To)
	}
	return nil
}

// ran reports whether id is a member that has run: with dynamic
// membership, a present or past member.
func (c *Cluster) ran(id uint64) bool {
	i, ok := slices.BinarySearch(c.members, id)
	return ok && c.nodes[i].incarnation > 0
}

// broadcast puts a copy of m for every other member on the network; with
// dynamic membership, for every other node that runs (paused or not):
// those that subscribe when it is sent.
func (c *Cluster) broadcast(m protocol.Message) {
	for _, n := range c.nodes {
		if n.id != m.From && (!c.dynamic || n.up()) {
			c.send(m, n.id)
		}
	}
}

// observe checks the invariants that one step of node n's machine could
// have broken.
func (c *Cluster) observe(n *node, s driver.Step) {
	rd, st := s.Ready, s.Status
	if s.Tick && n.quiet > 0 && (rd.State != nil || len(rd.Messages) > 0 || rd.Claimed != 0 || len(rd.Events) > 0 || st != n.status) {
		c.fail("node %d: Due said its next %d ticks could do nothing, but one did: %+v, status %+v", n.id, n.quiet, rd, st)
	}
	defer func() { n.quiet = n.m.Due() - 1 }()
	if rd.State != nil {
		if err := rd.State.Validate(); err != nil {
			c.fail("node %d stored an invalid state %+v: %v", n.id, *rd.State, err)
		}
	}
	for _, m := range rd.Messages {
		if !s.Stale && m.Type == protocol.TypePrepare && m.From == n.id {
			n.prepared = c.now
			n.held = n.held[:0]
			if m.Cfg != nil {
				n.held = append(n.held, m.Cfg)
			}
		}
	}
	if v, ok := n.m.(voting); ok && c.dynamic {
		if cur := v.Voters(); cur != nil && (len(n.held) == 0 || n.held[len(n.held)-1] != cur) {
			n.held = append(n.held, cur)
		}
	}
	for _, ev := range rd.Events {
		switch ev.Kind {
		case election.ElectionStarted:
			c.elections++
		case election.MemberLied:
			c.convictions++
			if _, ok := slices.BinarySearch(c.traitors, ev.Member); !ok {
				c.fail("node %d convicted %d, an honest member", n.id, ev.Member)
			}
		}
	}
	for _, k := range c.checks {
		k.stepped(n, s)
	}
	if rd.Claimed != 0 {
		c.claim(n, rd.Claimed, st)
	}
	if st != n.status {
		c.logf("status %d: %v leader=%d term=%d lease=%d", n.id, st.Role, st.Leader, st.Term, st.LeaseUntil)
	}
	if st.ID != n.id {
		c.fail("node %d reports ID %d", n.id, st.ID)
	}
	if st.Term < n.status.Term {
		c.fail("node %d: term went back from %d to %d", n.id, n.status.Term, st.Term)
	}
	if st.Term < n.floor {
		c.fail("node %d accepted term %d, below term %d on its disk when it started", n.id, st.Term, n.floor)
	}
	for _, k := range c.checks {
		k.status(n, st)
	}
	if st.Leader != 0 {
		if _, ok := slices.BinarySearch(c.members, st.Leader); !ok {
			c.fail("node %d: leader %d is not a member", n.id, st.Leader)
		} else if c.dynamic && !c.ran(st.Leader) {
			c.fail("node %d: leader %d has never run", n.id, st.Leader)
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
	c.checkExclusive()
}

// claim checks a claim of term by n: never claimed before by anyone, in
// any incarnation; n leads with it; and, with leases, n's side of a
// partition that began before its campaign holds a majority.
func (c *Cluster) claim(n *node, term uint64, st election.SoftState) {
	c.logf("claim %d term %d", n.id, term)
	if prev, ok := c.claims[term]; ok {
		if prev == n.id && term <= n.forgot {
			// What a node that lost its disk knows of its past is the
			// stream's last announcement and the live leader's term
			// (docs/fault-model.md, disk loss): below its own old claim,
			// it may claim it again.
			c.reclaims++
			c.logf("term %d claimed again by %d, which lost its disk since it claimed it (the last announcement was term %d)", term, n.id, c.announced)
		} else {
			c.fail("term %d claimed twice: by %d and by %d (incarnation %d)", term, prev, n.id, n.incarnation)
		}
	}
	c.claims[term] = n.id
	c.maxClaim = max(c.maxClaim, term)
	n.claimed = max(n.claimed, term)
	c.announced = term
	if st.Role != election.Leader || st.Term != term {
		c.fail("node %d claimed term %d but its status is %v term %d", n.id, term, st.Role, st.Term)
	}
	if !c.leases || c.split < 0 || c.split >= n.prepared {
		return
	}
	if _, ok := n.m.(voting); ok && c.dynamic {
		if !c.sideQuorate(n) {
			c.fail("node %d claimed term %d on a side %v of a partition since tick %d, before its campaign, with a quorum of none of the voters it held since: %s",
				n.id, term, c.sideOf(n.id), c.split, heldString(n.held))
		}
		return
	}
	if c.side(n.id) < c.quorum() {
		c.fail("node %d claimed term %d on a side of %d of %d members, partitioned since tick %d, before its campaign", n.id, term, c.side(n.id), len(c.members), c.split)
	}
}

// voting is a machine whose voters are a configuration that changes
// (Paxos with dynamic membership, protocol.Voters).
type voting interface {
	Voters() *protocol.Voters
}

// sideOf is the members on id's side of the current partition, sorted.
func (c *Cluster) sideOf(id uint64) []uint64 {
	var side []uint64
	for _, m := range c.members {
		if c.groups[m] == c.groups[id] {
			side = append(side, m)
		}
	}
	return side
}

// sideQuorate reports whether n's side of the partition holds a quorum
// of a voter configuration n held since its campaign began: the one it
// counted its promises and acceptances under is among them.
func (c *Cluster) sideQuorate(n *node) bool {
	side := c.sideOf(n.id)
	for _, v := range n.held {
		if v.Quorate(side) {
			return true
		}
	}
	return false
}

// VotersOf returns the voter configuration node id's machine holds (Paxos
// with dynamic membership: paxos.Machine.Voters), and whether it runs and
// holds one.
func (c *Cluster) VotersOf(id uint64) (*protocol.Voters, bool) {
	n := c.node(id)
	v, ok := n.m.(voting)
	if !ok || !n.up() || v.Voters() == nil {
		return nil, false
	}
	w := *v.Voters()
	w.Voters, w.Next = slices.Clone(w.Voters), slices.Clone(w.Next)
	return &w, true
}

// Do runs op on node id's machine through its driver, as the runtime's
// loop runs a request (driver.Do): first the ticks its clock completed,
// then op; what op made the machine do is stored before its messages are
// sent, and checked as every step is. It returns op's error, or an error
// when the node is down or paused (its loop would not answer).
func (c *Cluster) Do(id uint64, op func(election.Machine) error) error {
	n := c.node(id)
	if !n.up() || n.paused {
		return fmt.Errorf("sim: node %d does not run, or is paused", id)
	}
	c.tickNode(n)
	err := n.d.Do(op)
	c.logf("do on %d: %v", id, err)
	c.flush(n)
	return err
}

// checkExclusive checks, for algorithms with leases, that at most one node
// reports leader now.
func (c *Cluster) checkExclusive() {
	if !c.leases {
		return
	}
	var first *node
	for _, n := range c.nodes {
		if !n.reports() {
			continue
		}
		if first != nil {
			c.fail("nodes %d (term %d, lease to tick %d of its clock, now %d) and %d (term %d, lease to %d, now %d) both lead",
				first.id, first.status.Term, first.status.LeaseUntil, first.clock/ppm, n.id, n.status.Term, n.status.LeaseUntil, n.clock/ppm)
			return
		}
		first = n
	}
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
