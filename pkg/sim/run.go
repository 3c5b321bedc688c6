package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/baton-election/baton/pkg/election"
)

// The shape of a random run.
const (
	// MaxSmall is the largest cluster of a run of no given size.
	MaxSmall = 7
	// TMax is t_max, the largest delay of the quiet phase, in ticks.
	TMax = 2
	// MaxFaultDelay is the largest delay of a copy in the fault phase,
	// long delays included: twice the default leader time-out.
	MaxFaultDelay = 2 * election.DefaultLeaderTimeoutTicks
	// maxIDs bounds the random IDs of small clusters, so that they are not
	// contiguous.
	maxIDs = 30
)

// Spec is an algorithm under test.
type Spec struct {
	// Name names it; "ring" and "byzantine" select their message bounds
	// (MessageBound, StartBound).
	Name    string
	Factory Factory
	// Leases: the algorithm keeps leaders exclusive in time (Paxos); see
	// Config.Leases. It also needs a majority of the members to elect.
	Leases bool
	// Spread ranks the members of every run by election.Spread, with the
	// election named after the run's seed (SpreadRank), instead of by
	// ID: "the highest" of every check is then the highest-ranked. It
	// draws nothing from the run's random source, so a seed's faults are
	// the same either way.
	Spread bool
}

// SpreadRank is the rank of the runs of seed of a Spec with Spread:
// election.Spread of the election named "sim-<seed>".
func SpreadRank(seed uint64) election.Rank { return election.Spread(fmt.Sprintf("sim-%d", seed)) }

// traceRank writes, for a run ranked by Spread, the members in
// increasing rank to the trace w.
func traceRank(w io.Writer, rank election.Rank, members []uint64) {
	if !rank.IsSpread() {
		return
	}
	ranked := slices.Clone(members)
	rank.Sort(ranked)
	fmt.Fprintf(w, "ranked by %s(%s), lowest first: %v\n", rank, rank.Cluster(), ranked)
}

// rank is the rank of the run of seed.
func (s Spec) rank(seed uint64) election.Rank {
	if s.Spread {
		return SpreadRank(seed)
	}
	return election.ByID()
}

// Bound is B, the number of ticks after the last disturbance of the quiet
// phase within which a random run must converge (see the package doc).
func Bound(spec Spec, n int, t election.Timing) int {
	b := MaxFaultDelay + election.MaxAdaptiveTimeoutFactor*t.LeaderTimeoutTicks + 2*t.CoordinatorTicks + 2*t.AnswerTicks + 4*TMax
	if spec.Leases {
		// Grants, and the wait of restarted acceptors, run out (each a
		// lease, on clocks up to 5% slow), then a campaign backed off for
		// a higher one that failed, then the hand-over to the highest.
		lease := (t.LeaseTicks + 2) * 21 / 20
		b += 3*lease + t.CoordinatorTicks
	}
	return b
}

// MessageBound is how many messages (a broadcast counting once) one
// election may take in a cluster of n with an algorithm: the worst case the
// package doc states.
func MessageBound(spec Spec, n int) int {
	switch {
	case spec.Name == "byzantine":
		return byzantineElection(n)
	case spec.Leases:
		// Every node campaigns: a Prepare, n-1 answers, a Propose and n-1
		// answers each, and the leader's first renewal.
		return n * (2*n + 2)
	case spec.Name == "ring":
		// Every node initiates; each round passes each node at most twice
		// (Chang–Roberts), each hop acknowledged; one Elected round.
		return 2*n*2*n + 2*n + 1
	}
	// Bully: every node sends Election, every higher node answers each
	// lower one, and every node may claim once.
	return n + n*(n-1)/2 + n
}

// ElectionBound is how many messages one node's election may cost, that
// is, what may follow one ElectionStarted event: Bully, its Election, an
// Answer from each higher node and its Coordinator; the ring, its share of
// the rounds (it forwards each round at most twice and acknowledges each
// message it receives: at most two rounds in flight) and the winner's
// heartbeat and Elected; Paxos, a campaign: Prepare, n-1 answers,
// Propose, n-1 answers and a Resign if it hands over.
func ElectionBound(spec Spec, n int) int {
	switch {
	case spec.Leases:
		return 2*n + 1
	case spec.Name == "ring":
		return 2*2*2 + 3
	}
	return n + 1
}

// ClaimBound is how many messages one claim may cost beyond its election:
// a Stale reply from every other node to it and to its next heartbeat,
// when they know a newer term.
func ClaimBound(n int) int { return 2 * (n - 1) }

// StartBound is how many messages the start of one node may cost while
// the others agree. If it led, its crash is a failover too: the others
// may elect a successor before it takes over again, so two elections each
// led by the highest live node: Bully, twice an Election, an Answer from
// each higher node and a Coordinator; the ring, twice a round with its
// acknowledgements and the winner's heartbeat and Elected, plus the
// rounds of the lower nodes that initiate before that round reaches them
// (RingEarlyInitiators, an Election and its Ack each, swallowed by their
// higher neighbour); Paxos, twice a campaign (Prepare and Propose with n-1
// answers each) and a hand-over.
func StartBound(spec Spec, n int) int {
	switch {
	case spec.Name == "byzantine":
		// Its hello and the others' answers, the time-out of the term it
		// restored (it never leads that term again) and their answers;
		// then two elections, as above.
		return 2*byzantineElection(n) + 2 + 2*(n-1)
	case spec.Leases:
		return 2*(2*n+2) + 1
	case spec.Name == "ring":
		return 2*(2*n+3) + 2*RingEarlyInitiators(n, election.DefaultAnswerTicks)
	}
	return 2 * (n + 2)
}

// byzantineElection is how many messages one change of term of the
// byzantine algorithm (package byzantine) may take among n honest
// members with the default timing, once messages arrive within TMax; a
// leader's certified rounds and their acks are steady traffic, not
// counted:
//
//   - 2n time-outs: each member signs one of the term it gives up when it
//     learns the leader left (its Resign, its connection's end, its
//     silence), and once more if a second of these follows before it
//     entered the next term;
//   - 2n(n−1) answers with a term's proof (bz_status) to a member behind
//     (its time-out of the old term, or its round without the
//     certificate): at most one per member pair a heartbeat interval,
//     and those causes last two intervals at most;
//   - byzantineRounds rounds of the next term's leader before a quorum
//     voted, each a proposal and at most n−1 answers (a member
//     broadcasts its vote in answer to the first round it grants, and
//     acks each later one before the certificate);
//   - the old leader's Resign, when it hands over.
//
// TestByzantineMessagesWithinBound checks it in the simulator.
func byzantineElection(n int) int {
	return 2*n + 2*n*(n-1) + byzantineRounds(n)*n + 1
}

// byzantineRounds is how many rounds the leader of a new term may propose
// before a quorum voted, with the default timing: the old leader's lease
// (LeaseTicks+1 ticks, plus the round in flight) stretched by two clocks
// 5% apart from real time, in heartbeat intervals, and two rounds more
// (the one the last vote answers, and the one that carries the
// certificate).
func byzantineRounds(n int) int {
	t := election.DefaultLeaseTiming(n)
	wait := (t.LeaseTicks + 2 + TMax) * 21 * 21 / (20 * 20)
	return (wait+t.HeartbeatTicks-1)/t.HeartbeatTicks + 2
}

// RingEarlyInitiators is how many nodes of a ring of n may initiate a
// round of their own during a failover that the highest live node leads,
// with a wait T of answerTicks: the node of rank r (the highest live is
// rank 0) initiates (r+1)·T after the leader's time-out, while the highest
// live node's round, going up the ring from the lowest ID, reaches it after
// n-r hops of at most TMax each (and time-outs differ by up to TMax, how
// late a heartbeat may be). Each such node initiates before the round
// reaches it only while (r+1)·T < (n-r+1)·TMax.
func RingEarlyInitiators(n, answerTicks int) int {
	return ((n+1)*TMax)/(answerTicks+TMax) + 1
}

// Result is the outcome of one random run.
type Result struct {
	Seed    uint64
	Members []uint64
	// QuietAt is the tick of the last disturbance of the quiet phase; End
	// the last tick.
	QuietAt, End int
	// Bound is B for this run.
	Bound int
	// Converged is how many ticks after QuietAt the cluster agreed for
	// good, or -1.
	Converged int
	// Messages is how many messages were sent from the start of the quiet
	// phase to the agreement, MessageLimit what the run allowed.
	Messages, MessageLimit int
	// Err is the first invariant or liveness violation, or nil.
	Err error
}

// faults are a run's rates of faults, drawn per seed.
type faults struct {
	crash, restart, resign, pause, resume, partition, heal, wholeRestart float64
}

// RunSeed runs one random run of spec with n members (a random size from 1
// to MaxSmall if n is 0). The seed alone decides everything, so the same
// seed gives the same run, event for event. trace, if not nil, receives
// the run's every event.
func RunSeed(seed uint64, spec Spec, n int, trace io.Writer) Result {
	s := &seedRun{spec: spec, n: n, res: &Result{Seed: seed, Converged: -1}}
	s.rng, s.trace = rand.New(rand.NewPCG(seed, 0x6261746f6e)), trace
	s.res.Err = chain(s.setup, s.faultPhase, s.quiet, s.restart, s.agree, s.withinMessages)
	return *s.res
}

// seedRun is a run of RunSeed under way.
type seedRun struct {
	run
	spec       Spec
	n          int
	res        *Result
	timing     election.Timing
	faulty     Network // the network of the fault phase
	f          faults
	faultTicks int
	ids        []uint64 // the members, sorted
	startAt    []int    // the tick each member first starts
	started    []bool
	// electionsAt[t] is how many elections had started by tick t.
	electionsAt []int
	// What the quiet phase found when it began, to count what it cost.
	sentBefore, backlogBefore, claimsBefore, inFlight, electionsBefore int
}

// setup draws the run's shape and builds its cluster, every node down.
func (s *seedRun) setup() error {
	rng, n := s.rng, s.n
	if n <= 0 {
		n = 1 + rng.IntN(MaxSmall)
	}
	members := make([]uint64, 0, n)
	if n <= MaxSmall {
		for _, i := range rng.Perm(maxIDs)[:n] {
			members = append(members, uint64(i)+1)
		}
	} else {
		for _, i := range rng.Perm(3 * n)[:n] {
			members = append(members, uint64(i)+1)
		}
	}
	s.n, s.res.Members = n, slices.Clone(members)
	s.timing = election.DefaultTiming(n)
	if s.spec.Leases {
		s.timing = election.DefaultLeaseTiming(n)
	}
	s.faulty, s.f = drawFaults(rng, n)
	rates := make(map[uint64]int64)
	if s.spec.Leases {
		// Every clock runs at its own rate within the drift bound the
		// timing assumes.
		drift := int64(election.DefaultMaxDrift * ppm)
		for _, id := range members {
			rates[id] = ppm - drift + rng.Int64N(2*drift+1)
		}
	}
	s.faultTicks = rng.IntN(300)
	s.res.Bound = Bound(s.spec, n, s.timing)
	if s.trace != nil {
		fmt.Fprintf(s.trace, "seed %d: %s, members %v, timing %+v, fault network %+v for %d ticks; faults %+v; clock rates %v; bound %d\n",
			s.res.Seed, s.spec.Name, members, s.timing, s.faulty, s.faultTicks, s.f, rates, s.res.Bound)
		traceRank(s.trace, s.spec.rank(s.res.Seed), members)
	}
	c, err := New(Config{Members: members, Timing: s.timing, Factory: s.spec.Factory, Leases: s.spec.Leases, Rates: rates, Rand: rng, Network: s.faulty, Trace: s.trace,
		Rank: s.spec.rank(s.res.Seed)})
	if err != nil {
		return err
	}
	s.c, s.ids = c, c.Members()
	// Cold start: every node starts within the first LeaderTimeoutTicks.
	s.startAt = make([]int, n)
	for i := range s.startAt {
		s.startAt[i] = rng.IntN(s.timing.LeaderTimeoutTicks)
	}
	s.started = make([]bool, n)
	return nil
}

// faultPhase runs the fault phase: the nodes start, then crash, restart,
// resign, pause and resume, and the network is split and lossy.
func (s *seedRun) faultPhase() error {
	p := &faultPhase{c: s.c, rng: s.rng, f: s.f, ids: s.ids, startAt: s.startAt, started: s.started}
	s.electionsAt = []int{0}
	return s.phase(s.faultTicks, func() error { p.step(); return nil }, func() {
		s.electionsAt = append(s.electionsAt, s.c.Elections())
	})
}

// quiet begins the quiet phase: healed, resumed, reliable, delays within
// t_max. Nodes that never started start now; each crashed node either
// restarts or stays down, but at least one node runs (a majority with
// leases). It notes what the phase starts from, to count its cost.
func (s *seedRun) quiet() error {
	c := s.c
	s.logf("quiet phase")
	if err := s.settleNetwork(s.faulty); err != nil {
		return err
	}
	s.sentBefore, _ = c.Messages()
	s.backlogBefore, s.claimsBefore, s.inFlight = c.Backlog(), c.Claims(), c.InFlight()
	// The elections the quiet phase may pay for: those it starts, and
	// those of the faults that may still run (started within a
	// coordinator and a leader time-out before it).
	s.electionsBefore = s.electionsAt[max(0, len(s.electionsAt)-1-s.timing.CoordinatorTicks-s.timing.LeaderTimeoutTicks)]
	need := 1
	if s.spec.Leases {
		need = s.n/2 + 1
	}
	s.bringUp(s.ids, s.started, need)
	s.res.QuietAt = c.Now()
	return nil
}

// restart restarts, in a third of the runs, one running node early in the
// quiet phase (from its disk): the last disturbance.
func (s *seedRun) restart() error {
	restarted, err := s.restartOne(s.ids, s.timing.LeaderTimeoutTicks)
	if err != nil {
		return err
	}
	if restarted {
		s.res.QuietAt = s.c.Now()
	}
	s.logf("quiet from here: must agree by tick %d", s.c.Now()+s.res.Bound)
	return nil
}

// agree waits for the agreement on the highest running ID within B of the
// last disturbance, held to the end of the run, and counts the messages
// sent from the quiet phase to each agreement.
func (s *seedRun) agree() error {
	res, t := s.res, s.timing
	res.End = res.QuietAt + res.Bound + 2*(t.LeaderTimeoutTicks+t.CoordinatorTicks)
	converged, err := s.highest(res.QuietAt, res.Bound, res.End, "live", "the quiet phase started", func() {
		c, spec, n := s.c, s.spec, s.n
		sent, _ := c.Messages()
		res.Messages = sent - s.sentBefore
		// Every election and every claim within its bound, one whole
		// election for what is left of the faults (rounds whose nodes
		// restarted), and two answers (a Stale reply, an ack) to each
		// copy still in flight from the faults or waiting for a paused
		// node: at most twice that.
		res.MessageLimit = 2 * ((c.Elections()-s.electionsBefore)*ElectionBound(spec, n) + (c.Claims()-s.claimsBefore)*ClaimBound(n) +
			MessageBound(spec, n) + 2*(s.inFlight+c.Backlog()-s.backlogBefore))
	})
	if err != nil {
		return err
	}
	res.Converged = converged
	return nil
}

// withinMessages checks the messages the quiet phase cost against their
// bound.
func (s *seedRun) withinMessages() error {
	if s.res.Messages > s.res.MessageLimit {
		return fmt.Errorf("%w: %d messages from the quiet phase to the agreement, above the bound %d for the %d elections", ErrInvariant, s.res.Messages, s.res.MessageLimit, s.c.Elections()-s.electionsBefore)
	}
	return nil
}

// describe renders every node's view, for failure messages.
func (c *Cluster) describe() string {
	s := ""
	for _, n := range c.nodes {
		if !n.up() {
			s += fmt.Sprintf("[%d down] ", n.id)
			continue
		}
		s += fmt.Sprintf("[%d %v leader=%d term=%d] ", n.id, n.status.Role, n.status.Leader, n.status.Term)
	}
	return s
}

// randomGroups splits members into two or three non-empty groups.
func randomGroups(rng *rand.Rand, members []uint64) [][]uint64 {
	k := 2
	if len(members) > 2 && rng.IntN(3) == 0 {
		k = 3
	}
	groups := make([][]uint64, k)
	for i, p := range rng.Perm(len(members)) {
		g := i % k // the first k in the permutation seed the k groups
		groups[g] = append(groups[g], members[p])
	}
	return groups
}

// drawFaults draws the network of a run's fault phase and its rates of
// faults for n members.
func drawFaults(rng *rand.Rand, n int) (Network, faults) {
	faulty := Network{
		MinDelay:    1,
		MaxDelay:    1 + rng.IntN(3*TMax),
		Long:        []float64{0, 0.001, 0.01}[rng.IntN(3)],
		LongDelay:   MaxFaultDelay,
		Loss:        []float64{0, 0.02, 0.1, 0.3}[rng.IntN(4)],
		Duplicate:   []float64{0, 0.05, 0.2}[rng.IntN(3)],
		Unreachable: []float64{0, 0.5, 1}[rng.IntN(3)],
		Events:      []float64{0, 1}[rng.IntN(2)],
	}
	// Rates of faults per node and tick (per tick for partitions). Large
	// clusters get fewer per node, so that some quiet stretches remain.
	scale := 1.0 / float64(max(1, n/7))
	f := faults{
		crash:        []float64{0, 0.005, 0.02}[rng.IntN(3)] * scale,
		restart:      []float64{0.01, 0.05}[rng.IntN(2)],
		resign:       []float64{0, 0.001, 0.005}[rng.IntN(3)] * scale,
		pause:        []float64{0, 0.002, 0.01}[rng.IntN(3)] * scale,
		resume:       []float64{0.01, 0.05}[rng.IntN(2)],
		partition:    []float64{0, 0.005, 0.02}[rng.IntN(3)],
		heal:         []float64{0.02, 0.1}[rng.IntN(2)],
		wholeRestart: []float64{0, 0, 0.003}[rng.IntN(3)],
	}
	return faulty, f
}

// faultPhase disturbs the nodes ids of a cluster in its fault phase:
// each starts at startAt (once started is set, it is up to the faults),
// crashes, restarts, resigns, pauses and resumes at the rates f; whole
// clusters crash and restart; the network is split and healed.
type faultPhase struct {
	c       *Cluster
	rng     *rand.Rand
	f       faults
	ids     []uint64
	startAt []int
	started []bool
	split   bool
}

// step draws the faults of one tick, before it passes.
func (p *faultPhase) step() {
	if p.rng.Float64() < p.f.wholeRestart {
		// Every node crashes at once, and starts again from its disk.
		for i, id := range p.ids {
			if p.started[i] {
				p.c.Crash(id)
			}
		}
		for i, id := range p.ids {
			if p.started[i] {
				p.c.Start(id)
			}
		}
	}
	for i, id := range p.ids {
		switch {
		case !p.started[i]:
			if p.startAt[i] <= p.c.Now() {
				p.started[i] = true
				p.c.Start(id)
			}
		case p.c.Paused(id):
			// As a paused process resumes, or as a node descheduled
			// past its deadline settles what waits in its socket.
			if p.rng.Float64() < p.f.resume {
				if p.rng.IntN(2) == 0 {
					p.c.Resume(id)
				} else {
					p.c.ResumeSettling(id)
				}
			}
		case p.c.Up(id) && p.rng.Float64() < p.f.crash:
			p.c.Crash(id)
		case p.c.Up(id) && p.rng.Float64() < p.f.resign:
			p.c.Resign(id)
		case p.c.Up(id) && p.rng.Float64() < p.f.pause:
			p.c.Pause(id)
		case !p.c.Up(id) && p.rng.Float64() < p.f.restart:
			p.c.Start(id)
		}
	}
	switch {
	case p.split && p.rng.Float64() < p.f.heal:
		p.c.Heal()
		p.split = false
	case !p.split && len(p.c.members) > 1 && p.rng.Float64() < p.f.partition:
		p.c.Partition(randomGroups(p.rng, p.c.members)...)
		p.split = true
	}
}
