package byzantine

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// The harness runs n members in ticks of real time, each member's clock
// at its own rate within election.DefaultMaxDrift: every message gets a
// random delay (and, before the network settles, may be dropped), the
// messages due in a tick are delivered in a seeded random order, then
// every live member ticks. Traitors run an honest machine whose output
// they filter, and add lies signed with their own keys. The invariants
// are checked after every delivery and every tick. It depends on the
// machine only through election.Machine, StepAt and Certificate, so that
// it can move to pkg/sim.

const testCluster = "sim"

// testKeys are deterministic keys for members 1..n (sim.MemberKeys).
type testKeys struct {
	keys    *certify.Keys
	signers map[uint64]certify.Signer
}

func keysFor(t testing.TB, n int) *testKeys {
	var ids []uint64
	for id := uint64(1); id <= uint64(n); id++ {
		ids = append(ids, id)
	}
	keys, signers, err := sim.MemberKeys(ids)
	if err != nil {
		t.Fatal(err)
	}
	return &testKeys{keys: keys, signers: signers}
}

// scenario says what can go wrong in a run.
type scenario struct {
	n        int
	traitors int  // members that lie (the highest IDs among a random pick)
	crashes  bool // honest members crash and restart before the network settles
	blips    bool // live members are cut off and reported down (connection blips) before the network settles
	silent   bool // the one traitor is the highest ID, and falls silent when the network settles
	drops    bool // messages are lost before the network settles
	maxDelay int  // largest delay before the network settles, in ticks
	settle   int  // tick at which the network settles
	end      int  // last tick
	// rank ranks the members (election.Config.Rank); the traitors of
	// sim.NewTraitor assume the rank by ID.
	rank election.Rank
}

type member struct {
	id      uint64
	m       *Machine
	up      bool
	traitor bool
	liar    *sim.Traitor // a traitor's lies
	hard    election.HardState
	rate    float64 // ticks of its clock per tick of real time, within the drift bound
	ticks   float64 // its clock's ticks owed
	term    uint64  // highest term reported, for the monotonicity check
}

type inFlight struct {
	at  int
	to  uint64
	msg protocol.Message
}

type harness struct {
	t        testing.TB
	seed     uint64
	sc       scenario
	rng      *rand.Rand
	keys     *testKeys
	ids      []uint64
	members  map[uint64]*member
	now      int
	flight   []inFlight
	history  []protocol.Message // for replays, bounded
	certs    map[uint64]uint64  // term → leader of every valid certificate seen
	refused  map[string]bool    // certificates already found invalid
	lied     map[uint64]bool    // members convicted by some honest member
	timing   election.Timing
	cutUntil map[uint64]int // member → tick until which it is cut off
	trace    hash.Hash64    // of every message sent, for the determinism check
	invalid  int            // messages of traitors that receivers would drop
	firstLed int            // first tick after settling with an honest leader, -1 if none
	maxTerm  uint64
}

func newHarness(t testing.TB, seed uint64, sc scenario) *harness {
	h := &harness{
		t: t, seed: seed, sc: sc, rng: rand.New(rand.NewPCG(seed, uint64(sc.n))),
		keys: keysFor(t, sc.n), members: map[uint64]*member{},
		certs: map[uint64]uint64{}, cutUntil: map[uint64]int{}, trace: fnv.New64a(), refused: map[string]bool{}, lied: map[uint64]bool{},
		timing: election.DefaultLeaseTiming(sc.n), firstLed: -1,
	}
	for id := uint64(1); id <= uint64(sc.n); id++ {
		h.ids = append(h.ids, id)
	}
	perm := h.rng.Perm(sc.n)
	for i, id := range h.ids {
		drift := election.DefaultMaxDrift
		mb := &member{id: id, up: true, traitor: perm[i] < sc.traitors, rate: 1 - drift + 2*drift*h.rng.Float64()}
		if sc.silent {
			mb.traitor = i == sc.n-1
		}
		h.members[id] = mb
		h.start(mb, false)
	}
	var traitors []uint64
	for _, id := range h.ids {
		if h.members[id].traitor {
			traitors = append(traitors, id)
		}
	}
	for _, id := range traitors {
		h.members[id].liar = sim.NewTraitor(sim.TraitorConfig{ID: id, Signer: h.keys.signers[id], Cluster: testCluster,
			Members: h.ids, Accomplices: traitors, Rand: h.rng})
	}
	return h
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("seed %d, n=%d, tick %d: %s", h.seed, h.sc.n, h.now, fmt.Sprintf(format, args...))
}

func (h *harness) start(mb *member, restored bool) {
	cfg := Config{
		Config:  election.Config{ID: mb.id, Members: h.ids, Timing: h.timing, State: mb.hard, Restored: restored, Rank: h.sc.rank},
		Cluster: testCluster, Signer: h.keys.signers[mb.id], Keys: h.keys.keys,
	}
	m, err := New(cfg)
	if err != nil {
		h.fatalf("New(%d): %v", mb.id, err)
	}
	mb.m, mb.up = m, true
	m.Start()
	h.drain(mb)
}

func (h *harness) settled() bool { return h.now >= h.sc.settle }

// send puts msg from mb in flight to its receivers.
func (h *harness) send(from uint64, msg protocol.Message) { h.sendTo(from, msg, 0) }

// sendTo puts msg from mb in flight to only, or to its receivers if only
// is 0.
func (h *harness) sendTo(from uint64, msg protocol.Message, only uint64) {
	if err := protocol.Validate(msg, h.ids); err != nil {
		if !h.members[from].traitor {
			h.fatalf("member %d sent an invalid message %v: %v", from, msg, err)
		}
		h.invalid++
		return // the receivers' runtime would drop it
	}
	h.checkCert(msg)
	h.trace.Write([]byte(msg.String()))
	if len(h.history) < 4096 {
		h.history = append(h.history, msg)
	} else {
		h.history[h.rng.IntN(len(h.history))] = msg
	}
	for _, to := range h.ids {
		if to == from || msg.To != 0 && msg.To != to || only != 0 && only != to {
			continue
		}
		if !h.settled() && h.sc.drops && h.rng.IntN(10) == 0 {
			continue
		}
		if h.now < h.cutUntil[from] || h.now < h.cutUntil[to] {
			continue
		}
		delay := 1 + h.rng.IntN(2)
		if !h.settled() {
			delay = 1 + h.rng.IntN(h.sc.maxDelay)
		}
		h.flight = append(h.flight, inFlight{at: h.now + delay, to: to, msg: msg})
	}
}

// checkCert verifies, once per distinct certificate, that no two valid
// certificates of one term name different leaders.
func (h *harness) checkCert(msg protocol.Message) {
	c := msg.Cert
	if c == nil {
		return
	}
	if l, ok := h.certs[c.Term]; ok && l == c.Leader {
		return
	}
	key := fmt.Sprint(c.Term, c.Leader, len(c.Votes), c.Votes[0].Signature[:8])
	if h.refused[key] {
		return
	}
	if certify.VerifyCertificate(h.keys.keys, *c) != nil {
		h.refused[key] = true
		return
	}
	if l, ok := h.certs[c.Term]; ok && l != c.Leader {
		h.fatalf("two certified leaders in term %d: %d and %d", c.Term, l, c.Leader)
	}
	h.certs[c.Term] = c.Leader
}

// drain collects what mb's machine wants done.
func (h *harness) drain(mb *member) {
	r := mb.m.Ready()
	if r.State != nil {
		if err := r.State.Validate(); err != nil {
			h.fatalf("member %d stored an invalid state %+v: %v", mb.id, *r.State, err)
		}
		if !mb.traitor && (r.State.Term < mb.hard.Term || r.State.Vote.Term < mb.hard.Vote.Term) {
			h.fatalf("member %d stored %+v after %+v", mb.id, *r.State, mb.hard)
		}
		mb.hard = *r.State
	}
	for _, e := range r.Events {
		if e.Kind == election.MemberLied && !mb.traitor {
			if !h.members[e.Member].traitor {
				h.fatalf("member %d convicted the honest member %d", mb.id, e.Member)
			}
			h.lied[e.Member] = true
		}
	}
	if mb.traitor && h.sc.silent && h.settled() {
		return
	}
	for _, msg := range r.Messages {
		if msg.From != mb.id {
			h.fatalf("member %d sent a message from %d", mb.id, msg.From)
		}
		if mb.traitor && h.rng.IntN(4) == 0 {
			continue // withholds
		}
		h.send(mb.id, msg)
	}
}

// lie has traitor mb send something false, signed with its own key: a
// lie of sim.Traitor's (the simulator's traitors tell the same), or a
// replay of something someone sent.
func (h *harness) lie(mb *member) {
	if h.rng.IntN(8) == 0 {
		if len(h.history) > 0 {
			old := h.history[h.rng.IntN(len(h.history))]
			to := h.ids[h.rng.IntN(len(h.ids))]
			if to != old.From && (old.To == 0 || old.To == to) {
				h.flight = append(h.flight, inFlight{at: h.now + 1, to: to, msg: old})
			}
		}
		return
	}
	for _, l := range mb.liar.Lies(mb.m.Status().Term) {
		if l.To == 0 {
			h.send(mb.id, l.Message)
			continue
		}
		h.sendTo(mb.id, l.Message, l.To) // a broadcast told to one member only
	}
}

// check checks the invariants that hold at every instant.
func (h *harness) check() {
	leaders := 0
	for _, id := range h.ids {
		mb := h.members[id]
		if !mb.up {
			continue
		}
		if mb.traitor {
			// A traitor that runs the algorithm may lead, certified:
			// that counts for liveness, not for the invariants.
			if mb.m.Status().Role == election.Leader && h.settled() && h.firstLed < 0 && !h.sc.silent {
				h.firstLed = h.now
			}
			continue
		}
		st := mb.m.Status()
		if st.Term < mb.term {
			h.fatalf("member %d went back from term %d to %d", id, mb.term, st.Term)
		}
		mb.term = st.Term
		h.maxTerm = max(h.maxTerm, st.Term)
		if st.Role == election.Leader {
			leaders++
			if leaders > 1 {
				h.fatalf("two honest members report leader at once")
			}
			if h.settled() && h.firstLed < 0 {
				h.firstLed = h.now
			}
		}
		if c, ok := mb.m.Certificate(); ok {
			if l, seen := h.certs[c.Term]; seen && l != c.Leader {
				h.fatalf("member %d holds a certificate of %d in term %d, another names %d", id, c.Leader, c.Term, l)
			}
			h.certs[c.Term] = c.Leader
		}
	}
}

// step runs one tick.
func (h *harness) step() {
	h.now++
	var due, later []inFlight
	for _, f := range h.flight {
		if f.at <= h.now {
			due = append(due, f)
		} else {
			later = append(later, f)
		}
	}
	h.flight = later
	h.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, f := range due {
		mb := h.members[f.to]
		if !mb.up {
			continue
		}
		if mb.liar != nil {
			mb.liar.Receive(f.msg) // certificates to replay
		}
		election.StepAt(mb.m, f.msg, mb.m.now)
		h.drain(mb)
		h.check()
	}
	for _, id := range h.ids {
		mb := h.members[id]
		if !mb.up {
			continue
		}
		// Its clock runs at its own rate: it ticks 0, 1 or 2 times.
		for mb.ticks += mb.rate; mb.ticks >= 1; mb.ticks-- {
			mb.m.Tick()
			h.drain(mb)
		}
		if mb.traitor && !h.sc.silent && h.rng.IntN(3) == 0 {
			h.lie(mb)
		}
	}
	h.check()
	if h.sc.crashes && !h.settled() && h.rng.IntN(40) == 0 {
		h.crashOrRestart()
	}
	if (h.sc.crashes || h.sc.blips) && !h.settled() && h.rng.IntN(30) == 0 {
		h.blip()
	}
}

// crashOrRestart crashes a live honest member (keeping a quorum of live
// honest members possible after restarts) or restarts a crashed one.
func (h *harness) crashOrRestart() {
	id := h.ids[h.rng.IntN(len(h.ids))]
	mb := h.members[id]
	if mb.traitor {
		return
	}
	if mb.up {
		if h.rng.IntN(2) == 0 {
			// It leaves cleanly (SIGTERM): a leader hands over.
			mb.m.Resign()
			h.drain(mb)
			h.check()
		}
		mb.up = false
		for _, other := range h.ids {
			if o := h.members[other]; o.up && other != id {
				o.m.PeerDown(id)
				h.drain(o)
			}
		}
		return
	}
	h.start(mb, true)
}

// blip cuts a live member off for a while and reports its connection
// closed to every other member although it runs on: those that follow
// it give its term up at once, while it may still hold its lease.
func (h *harness) blip() {
	id := h.ids[h.rng.IntN(len(h.ids))]
	if l := h.leader(); l != 0 && h.rng.IntN(2) == 0 {
		id = l
	}
	h.cutUntil[id] = h.now + 5 + h.rng.IntN(40)
	for _, other := range h.ids {
		if o := h.members[other]; o.up && other != id {
			o.m.PeerDown(id)
			h.drain(o)
		}
	}
	h.check()
}

// run runs the scenario and returns the ticks from settling to the first
// honest leader.
func (h *harness) run() int {
	for h.now < h.sc.end {
		if h.now == h.sc.settle && h.sc.crashes {
			// Settle with every member but up to f−traitors honest ones up.
			down := certify.F(h.sc.n) - h.sc.traitors
			for _, id := range h.ids {
				if mb := h.members[id]; !mb.up {
					if down > 0 {
						down--
					} else {
						h.start(mb, true)
					}
				}
			}
		}
		h.step()
	}
	if h.firstLed < 0 {
		h.fatalf("no certified leader in %d ticks after the network settled", h.sc.end-h.sc.settle)
	}
	if h.maxTerm > 1<<20 {
		h.fatalf("an honest member reached term %d", h.maxTerm)
	}
	return h.firstLed - h.sc.settle
}

// highestLiveHonest returns the highest-ranked live honest member (by
// the scenario's rank: the highest ID by default).
func (h *harness) highestLiveHonest() uint64 {
	top := uint64(0)
	for _, id := range h.ids {
		if mb := h.members[id]; mb.up && !mb.traitor && h.sc.rank.Above(id, top) {
			top = id
		}
	}
	return top
}

// leader returns the honest member that reports leader, 0 if none.
func (h *harness) leader() uint64 {
	for _, id := range h.ids {
		if mb := h.members[id]; mb.up && !mb.traitor && mb.m.Status().Role == election.Leader {
			return id
		}
	}
	return 0
}
