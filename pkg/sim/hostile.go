package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// Inject puts m on the network as its sender, a member that does not run
// here: a member that lies with its own identity (its messages are signed
// with its own key, so the receivers take them as its). m must be valid
// (protocol.Validate, as the receivers check); To 0 sends it to every
// other member. The network treats it as any other message.
func (c *Cluster) Inject(m protocol.Message) error {
	m.V = protocol.Version
	if err := c.validate(m); err != nil {
		return err
	}
	if c.node(m.From).up() {
		return fmt.Errorf("sim: %d runs here: only a member that does not may be injected as", m.From)
	}
	c.logf("inject %v", m)
	for _, k := range c.checks {
		k.sent(m, "injected by", m.From)
	}
	if m.To != 0 {
		c.send(m, m.To)
		return nil
	}
	c.broadcast(m)
	return nil
}

// Tap makes f see every copy that reaches a member that does not run (the
// copies a liar injected with Inject would receive), in the order they
// arrive; nil stops it.
func (c *Cluster) Tap(f func(to uint64, m protocol.Message)) { c.tap = f }

// The shape of a hostile run.
const (
	// MaxLieTicks bounds how long the liar lies in a hostile run.
	MaxLieTicks = 500
	// maxFlood is the most messages the liar sends in one tick.
	maxFlood = 200
)

// liar is a member that lies at random as itself.
type liar struct {
	id      uint64
	members []uint64
	rng     *rand.Rand
	inc     uint64
	seen    []protocol.Message // copies addressed to it, newest last (bounded)
	sent    []protocol.Message // what it sent, for replays (bounded)
	high    uint64             // the highest term seen in a copy
}

// types are the message types the liar picks from.
var types = []protocol.Type{
	protocol.TypeElection, protocol.TypeAnswer, protocol.TypeCoordinator, protocol.TypeElected,
	protocol.TypeAck, protocol.TypeHeartbeat, protocol.TypeResign, protocol.TypeStale, protocol.TypeProbe,
	protocol.TypePrepare, protocol.TypePromise, protocol.TypePropose, protocol.TypeAccepted, protocol.TypeNack,
}

func (l *liar) member() uint64 { return l.members[l.rng.IntN(len(l.members))] }

func (l *liar) other() uint64 {
	for {
		if id := l.member(); id != l.id {
			return id
		}
	}
}

// owned is the smallest term at or above t that the liar owns, if below
// the ceiling.
func (l *liar) owned(t uint64) uint64 {
	n := uint64(len(l.members))
	i, _ := slices.BinarySearch(l.members, l.id)
	own := uint64(i) + 1
	t = max(t, 1)
	r := t - t%n + own
	if r < t {
		r += n
	}
	if r > protocol.MaxTerm {
		r -= n
	}
	return r
}

func (l *liar) term() uint64 {
	switch l.rng.IntN(6) {
	case 0:
		return protocol.MaxTerm - l.rng.Uint64N(1000) // near the ceiling
	case 1:
		return l.owned(protocol.MaxTerm - l.rng.Uint64N(1<<20))
	case 2:
		return l.owned(l.high + 1 + l.rng.Uint64N(10)) // just above the cluster
	case 3:
		return l.rng.Uint64N(l.high + 2) // old
	case 4:
		return l.owned(l.high + l.rng.Uint64N(1<<40))
	}
	return 0
}

// next is the liar's next lie.
func (l *liar) next() protocol.Message {
	switch l.rng.IntN(10) {
	case 0:
		if len(l.sent) > 0 { // a replay of its own
			return l.sent[l.rng.IntN(len(l.sent))]
		}
	case 1, 2:
		if len(l.seen) > 0 { // an answer that plays along, or lies in it
			return l.answer(l.seen[l.rng.IntN(len(l.seen))])
		}
	case 3:
		switch l.rng.IntN(3) { // an incarnation jump
		case 0:
			l.inc = math.MaxUint64
		case 1:
			l.inc += l.rng.Uint64N(1 << 40)
		default:
			l.inc = 1 + l.rng.Uint64N(l.inc)
		}
	}
	m := protocol.Message{
		Type: types[l.rng.IntN(len(types))],
		From: l.id,
		Term: l.term(),
		Inc:  l.inc,
		Seq:  l.rng.Uint64N(8),
	}
	if l.rng.IntN(2) == 0 {
		m.To = l.other()
	}
	switch l.rng.IntN(3) {
	case 0:
		m.Candidate = l.id
	case 1:
		m.Candidate = l.member()
	}
	if m.Type == protocol.TypeElection {
		if m.To == 0 {
			m.Candidate = 0
		} else if m.Candidate == 0 {
			m.Candidate = l.id
		}
	}
	if m.Type == protocol.TypeElected || m.Type == protocol.TypeCoordinator || m.Type == protocol.TypeHeartbeat ||
		m.Type == protocol.TypePrepare || m.Type == protocol.TypePropose || m.Type == protocol.TypePromise || m.Type == protocol.TypeAccepted {
		m.Term = max(m.Term, 1)
	}
	switch m.Type {
	case protocol.TypeResign, protocol.TypeCoordinator, protocol.TypeHeartbeat, protocol.TypePrepare, protocol.TypePropose:
		m.To = 0
		if m.Type == protocol.TypePropose && m.Candidate != 0 {
			m.Candidate = l.id
		}
	case protocol.TypeElected, protocol.TypeAnswer, protocol.TypeAck, protocol.TypeStale, protocol.TypeProbe,
		protocol.TypePromise, protocol.TypeAccepted, protocol.TypeNack:
		if m.To == 0 {
			m.To = l.other()
		}
		if m.Type == protocol.TypeElected && m.Candidate == 0 {
			m.Candidate = l.id
		}
		if m.Type == protocol.TypePromise {
			m.Prior = l.rng.Uint64N(m.Term + 1)
		}
		if m.Type == protocol.TypeNack {
			m.Wait = l.rng.IntN(protocol.MaxWait + 1)
		}
	}
	return m
}

// answer is the liar's reply to a copy it received: what an honest member
// would answer, under a term of its choice.
func (l *liar) answer(in protocol.Message) protocol.Message {
	m := protocol.Message{From: l.id, To: in.From, Term: in.Term, Inc: l.inc, Seq: in.Seq}
	if l.rng.IntN(3) == 0 {
		m.Term = l.term()
	}
	switch in.Type {
	case protocol.TypePrepare:
		m.Type = protocol.TypePromise // promise anything
	case protocol.TypePropose:
		m.Type, m.Candidate = protocol.TypeAccepted, in.Candidate // accept anything
	case protocol.TypeElection:
		if in.To != 0 {
			m.Type, m.Seq = protocol.TypeAck, in.Seq
		} else {
			m.Type = protocol.TypeAnswer // "I am alive and higher"
		}
	case protocol.TypeElected:
		m.Type = protocol.TypeAck
	default:
		m.Type = protocol.TypeStale
		m.Candidate = l.id
	}
	return m
}

// HostileConfig shapes a hostile run.
type HostileConfig struct {
	// Acceptor lets the liar answer Prepare and Propose as a Paxos
	// acceptor that promises and accepts anything. Majorities of an odd
	// number of members may share only the liar, so this can break the
	// exclusivity of Paxos leaders there (seed 1652 of 3 members does;
	// docs/fault-model.md); with an even number it cannot.
	Acceptor bool
}

// RunHostile runs one random hostile run: a cluster of n members (a random
// size from 3 to MaxSmall if n is 0) where one member, at random, lies as
// itself for up to MaxLieTicks ticks (near-ceiling terms, incarnation
// jumps, resigns, replays of its own messages, floods of up to maxFlood
// messages a tick, claims, answers that play along) and then falls silent
// (as a crash). The others run honestly on a reliable network with
// delays within TMax. Every invariant is checked after every step (terms
// never go backwards, no term has two honest leaders, with leases no two
// honest nodes lead at once); once the liar is silent the honest members
// must agree on the highest honest ID within HostileBound.
func RunHostile(seed uint64, spec Spec, n int, hc HostileConfig, trace io.Writer) Result {
	h := &hostileRun{spec: spec, n: n, hc: hc, res: &Result{Seed: seed, Converged: -1}}
	h.rng, h.trace = rand.New(rand.NewPCG(seed, 0x6c696172)), trace
	h.res.Err = chain(h.setup, h.liePhase, h.silence, h.agree)
	return *h.res
}

// hostileRun is a run of RunHostile under way.
type hostileRun struct {
	run
	spec     Spec
	n        int
	hc       HostileConfig
	res      *Result
	timing   election.Timing
	members  []uint64 // sorted
	l        *liar
	lieTicks int
	startAt  map[uint64]int
}

// setup draws the run's shape, the liar among the members, and builds the
// cluster on a reliable network, every node down; the liar hears what
// reaches it (Tap).
func (h *hostileRun) setup() error {
	rng, n := h.rng, h.n
	if n <= 0 {
		n = 3 + rng.IntN(MaxSmall-2)
	}
	members := make([]uint64, 0, n)
	for _, i := range rng.Perm(maxIDs)[:n] {
		members = append(members, uint64(i)+1)
	}
	slices.Sort(members)
	h.n, h.members, h.res.Members = n, members, slices.Clone(members)
	h.timing = election.DefaultTiming(n)
	if h.spec.Leases {
		h.timing = election.DefaultLeaseTiming(n)
	}
	h.lieTicks = 1 + rng.IntN(MaxLieTicks)
	l := &liar{id: members[rng.IntN(n)], members: members, rng: rng, inc: 1 + rng.Uint64N(1<<40)}
	h.l = l
	if h.trace != nil {
		fmt.Fprintf(h.trace, "seed %d: %s, members %v, liar %d for %d ticks, %+v\n", h.res.Seed, h.spec.Name, members, l.id, h.lieTicks, h.hc)
	}
	net := Quiet(TMax)
	net.Duplicate = 0.05
	c, err := New(Config{Members: members, Timing: h.timing, Factory: h.spec.Factory, Leases: h.spec.Leases, Rand: rng, Network: net, Trace: h.trace})
	if err != nil {
		return err
	}
	h.c = c
	c.Tap(func(to uint64, m protocol.Message) {
		if to != l.id {
			return
		}
		l.high = max(l.high, m.Term)
		if len(l.seen) >= 64 {
			l.seen = l.seen[1:]
		}
		l.seen = append(l.seen, m)
	})
	h.startAt = make(map[uint64]int)
	for _, id := range members {
		h.startAt[id] = rng.IntN(h.timing.LeaderTimeoutTicks)
	}
	return nil
}

// liePhase runs while the liar lies (its first lieTicks ticks), and until
// every honest node has started, each at its tick.
func (h *hostileRun) liePhase() error {
	end := h.lieTicks
	for _, id := range h.members {
		if id != h.l.id {
			end = max(end, h.startAt[id]+1)
		}
	}
	return h.phase(end, h.lie, nil)
}

// lie starts the honest nodes due and, while it lies, has the liar send a
// few lies (or a flood of them) before one tick.
func (h *hostileRun) lie() error {
	c, rng, l := h.c, h.rng, h.l
	for _, id := range h.members {
		if id != l.id && h.startAt[id] == c.Now() {
			c.Start(id)
		}
	}
	if c.Now() >= h.lieTicks {
		return nil
	}
	k := rng.IntN(4)
	if rng.IntN(20) == 0 {
		k = 1 + rng.IntN(maxFlood) // a flood
	}
	for range k {
		m := l.next()
		if !h.hc.Acceptor && (m.Type == protocol.TypePromise || m.Type == protocol.TypeAccepted) {
			continue
		}
		if err := c.Inject(m); err != nil {
			var v *protocol.ValidationError
			if !errors.As(err, &v) {
				return err
			}
			continue // the receivers would drop it
		}
		if len(l.sent) >= 64 {
			l.sent = l.sent[1:]
		}
		l.sent = append(l.sent, m)
	}
	return nil
}

// silence has the liar fall silent: the last disturbance.
func (h *hostileRun) silence() error {
	res, t := h.res, h.timing
	res.QuietAt = h.c.Now()
	h.c.Tap(nil)
	res.Bound = HostileBound(h.spec, h.n, t, h.lieTicks)
	res.End = res.QuietAt + res.Bound + 2*(t.LeaderTimeoutTicks+t.CoordinatorTicks)
	h.logf("the liar is silent: must agree by tick %d", h.c.Now()+res.Bound)
	return nil
}

// agree waits for the honest members to agree on the highest honest ID
// within HostileBound, held to the end of the run.
func (h *hostileRun) agree() error {
	converged, err := h.highest(h.res.QuietAt, h.res.Bound, h.res.End, "honest", "the liar fell silent", nil)
	if err != nil {
		return err
	}
	h.res.Converged = converged
	return nil
}

// HostileBound is how many ticks after a liar that lied for lieTicks falls
// silent the honest members of a cluster of n agree: B, plus, at worst,
// the ticks it lied and the ticks a node's term credit takes to refill.
// Its lies may have raised some honest nodes' terms further than others'
// (by core.TermBurst at once and core.TermRate a tick), and the nodes
// behind catch up at that pace.
func HostileBound(spec Spec, n int, t election.Timing, lieTicks int) int {
	return Bound(spec, n, t) + lieTicks + int(core.TermBurst/core.TermRate)
}
