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
	rng := rand.New(rand.NewPCG(seed, 0x6261746f6e))
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
	timing := election.DefaultTiming(n)
	if spec.Leases {
		timing = election.DefaultLeaseTiming(n)
	}
	faulty, f := drawFaults(rng, n)
	rates := make(map[uint64]int64)
	if spec.Leases {
		// Every clock runs at its own rate within the drift bound the
		// timing assumes.
		drift := int64(election.DefaultMaxDrift * ppm)
		for _, id := range members {
			rates[id] = ppm - drift + rng.Int64N(2*drift+1)
		}
	}
	faultTicks := rng.IntN(300)
	b := Bound(spec, n, timing)
	res := Result{Seed: seed, Members: slices.Clone(members), Bound: b, Converged: -1}
	if trace != nil {
		fmt.Fprintf(trace, "seed %d: %s, members %v, timing %+v, fault network %+v for %d ticks; faults %+v; clock rates %v; bound %d\n",
			seed, spec.Name, members, timing, faulty, faultTicks, f, rates, b)
	}

	c, err := New(Config{Members: members, Timing: timing, Factory: spec.Factory, Leases: spec.Leases, Rates: rates, Rand: rng, Network: faulty, Trace: trace})
	if err != nil {
		res.Err = err
		return res
	}
	sorted := c.Members()

	// Cold start: every node starts within the first LeaderTimeoutTicks.
	startAt := make([]int, n)
	for i := range startAt {
		startAt[i] = rng.IntN(timing.LeaderTimeoutTicks)
	}
	started := make([]bool, n)

	// Fault phase. electionsAt[t] is how many elections had started by
	// tick t.
	electionsAt := []int{0}
	p := &faultPhase{c: c, rng: rng, f: f, ids: sorted, startAt: startAt, started: started}
	for c.Now() < faultTicks {
		p.step()
		c.Tick()
		electionsAt = append(electionsAt, c.Elections())
		if c.Err() != nil {
			res.Err = c.Err()
			return res
		}
	}

	// Quiet phase: healed, resumed, reliable, delays within t_max. Nodes
	// that never started start now; each crashed node either restarts or
	// stays down, but at least one node runs (a majority with leases).
	// Then, early in it, one node may restart (from its disk).
	if trace != nil {
		fmt.Fprintf(trace, "%5d  quiet phase\n", c.Now())
	}
	c.Heal()
	if err := c.SetNetwork(Network{MinDelay: 1, MaxDelay: TMax, Unreachable: faulty.Unreachable, Events: faulty.Events}); err != nil {
		res.Err = err
		return res
	}
	sentBefore, _ := c.Messages()
	backlogBefore, claimsBefore, inFlight := c.Backlog(), c.Claims(), c.InFlight()
	// The elections the quiet phase may pay for: those it starts, and
	// those of the faults that may still run (started within a
	// coordinator and a leader time-out before it).
	electionsBefore := electionsAt[max(0, len(electionsAt)-1-timing.CoordinatorTicks-timing.LeaderTimeoutTicks)]
	up := 0 // nodes running
	for i, id := range sorted {
		c.Resume(id)
		if !started[i] || (!c.Up(id) && rng.IntN(2) == 0) {
			c.Start(id)
		}
		if c.Up(id) {
			up++
		}
	}
	need := 1
	if spec.Leases {
		need = n/2 + 1
	}
	for _, i := range rng.Perm(n) {
		if up >= need {
			break
		}
		if id := sorted[i]; !c.Up(id) {
			c.Start(id)
			up++
		}
	}
	res.QuietAt = c.Now()
	if rng.IntN(3) == 0 {
		// A restart in the quiet phase.
		c.Run(rng.IntN(timing.LeaderTimeoutTicks))
		if c.Err() != nil {
			res.Err = c.Err()
			return res
		}
		var running []uint64
		for _, id := range sorted {
			if c.Up(id) {
				running = append(running, id)
			}
		}
		restarted := running[rng.IntN(len(running))]
		c.Start(restarted)
		res.QuietAt = c.Now()
	}
	if trace != nil {
		fmt.Fprintf(trace, "%5d  quiet from here: must agree by tick %d\n", c.Now(), c.Now()+b)
	}

	res.End = res.QuietAt + b + 2*(timing.LeaderTimeoutTicks+timing.CoordinatorTicks)
	converged, err := c.awaitAgreement(res.QuietAt, b, res.End, "live", "the quiet phase started", trace, func() {
		sent, _ := c.Messages()
		res.Messages = sent - sentBefore
		// Every election and every claim within its bound, one whole
		// election for what is left of the faults (rounds whose nodes
		// restarted), and two answers (a Stale reply, an ack) to each
		// copy still in flight from the faults or waiting for a paused
		// node: at most twice that.
		res.MessageLimit = 2 * ((c.Elections()-electionsBefore)*ElectionBound(spec, n) + (c.Claims()-claimsBefore)*ClaimBound(n) +
			MessageBound(spec, n) + 2*(inFlight+c.Backlog()-backlogBefore))
	})
	if err != nil {
		res.Err = err
		return res
	}
	res.Converged = converged
	if res.Messages > res.MessageLimit {
		res.Err = fmt.Errorf("%w: %d messages from the quiet phase to the agreement, above the bound %d for the %d elections", ErrInvariant, res.Messages, res.MessageLimit, c.Elections()-electionsBefore)
	}
	return res
}

// awaitAgreement ticks c until end. The quiet phase began at quietAt: the
// cluster must agree on the highest (who) ID within bound ticks of it and
// stay agreed; a liveness error says what began it (after). onAgree runs
// each time an agreement begins. It returns the ticks from quietAt to the
// agreement that lasted, or the first invariant violated, including an
// agreement on a term below one a running node claimed before.
func (c *Cluster) awaitAgreement(quietAt, bound, end int, who, after string, trace io.Writer, onAgree func()) (int, error) {
	since := -1
	for c.Now() < end {
		c.Tick()
		if err := c.Err(); err != nil {
			return 0, err
		}
		_, _, ok := c.Agreement()
		switch {
		case ok && since < 0:
			since = c.Now()
			if onAgree != nil {
				onAgree()
			}
		case !ok:
			since = -1
		}
		if since < 0 && c.Now() >= quietAt+bound {
			err := fmt.Errorf("sim: liveness violated: no agreement on the highest %s ID %d ticks after %s (tick %d): %s",
				who, c.Now()-quietAt, after, c.Now(), c.describe())
			if trace != nil {
				fmt.Fprintf(trace, "%5d  VIOLATION %v\n", c.Now(), err)
			}
			return 0, err
		}
	}
	if _, term, _ := c.Agreement(); term < c.MaxClaimedByRunning() {
		return 0, fmt.Errorf("%w: the cluster agreed on term %d, below term %d claimed before by a node that runs", ErrInvariant, term, c.MaxClaimedByRunning())
	}
	return since - quietAt, nil
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
