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
	// MaxMembers is the largest cluster a random run builds.
	MaxMembers = 7
	// TMax is t_max, the largest delay of the quiet phase, in ticks.
	TMax = 2
	// MaxFaultDelay is the largest delay of a copy in the fault phase.
	MaxFaultDelay = 3 * TMax
	// maxIDs bounds the random IDs, so that they are not contiguous.
	maxIDs = 30
)

// Bound is B, the number of ticks after the start of the quiet phase within
// which a random run must converge (see the package doc).
func Bound(t election.Timing) int {
	return MaxFaultDelay + t.LeaderTimeoutTicks + 2*t.CoordinatorTicks + 2*t.AnswerTicks + 4*TMax
}

// Result is the outcome of one random run.
type Result struct {
	Seed    uint64
	Members []uint64
	// QuietAt is the tick the quiet phase started at; End the last tick.
	QuietAt, End int
	// Bound is B for this run's timing.
	Bound int
	// Converged is how many ticks after QuietAt the cluster agreed for
	// good, or -1.
	Converged int
	// Err is the first invariant or liveness violation, or nil.
	Err error
}

// RunSeed runs one random run of the algorithm built by factory. The seed
// alone decides everything, so the same seed gives the same run, event for
// event. trace, if not nil, receives the run's every event.
func RunSeed(seed uint64, factory Factory, trace io.Writer) Result {
	rng := rand.New(rand.NewPCG(seed, 0x6261746f6e))
	n := 1 + rng.IntN(MaxMembers)
	members := make([]uint64, 0, n)
	for _, i := range rng.Perm(maxIDs)[:n] {
		members = append(members, uint64(i)+1)
	}
	timing := election.DefaultTiming(n)
	faulty := Network{
		MinDelay:    1,
		MaxDelay:    1 + rng.IntN(MaxFaultDelay),
		Loss:        []float64{0, 0.02, 0.1, 0.3}[rng.IntN(4)],
		Duplicate:   []float64{0, 0.05, 0.2}[rng.IntN(3)],
		Unreachable: []float64{0, 0.5, 1}[rng.IntN(3)],
	}
	crash := []float64{0, 0.005, 0.02}[rng.IntN(3)]     // per node and tick
	restart := []float64{0.01, 0.05}[rng.IntN(2)]       // per down node and tick
	resign := []float64{0, 0.001, 0.005}[rng.IntN(3)]   // per node and tick
	partition := []float64{0, 0.005, 0.02}[rng.IntN(3)] // per tick
	heal := []float64{0.02, 0.1}[rng.IntN(2)]           // per tick while split
	faultTicks := rng.IntN(300)
	b := Bound(timing)
	res := Result{Seed: seed, Members: slices.Clone(members), Bound: b, Converged: -1}
	if trace != nil {
		fmt.Fprintf(trace, "seed %d: members %v, timing %+v, fault network %+v for %d ticks; crash %v restart %v resign %v partition %v heal %v; bound %d\n",
			seed, members, timing, faulty, faultTicks, crash, restart, resign, partition, heal, b)
	}

	c, err := New(Config{Members: members, Timing: timing, Factory: factory, Rand: rng, Network: faulty, Trace: trace})
	if err != nil {
		res.Err = err
		return res
	}
	sorted := c.Members()

	// Cold start: every node starts within the first LeaderTimeoutTicks.
	starts := make([]int, n)
	for i := range starts {
		starts[i] = rng.IntN(timing.LeaderTimeoutTicks)
	}
	started := make([]bool, n)
	split := false

	// Fault phase.
	for c.Now() < faultTicks {
		for i, id := range sorted {
			switch {
			case !started[i]:
				if starts[i] <= c.Now() {
					started[i] = true
					c.Start(id)
				}
			case c.Up(id) && rng.Float64() < crash:
				c.Crash(id)
			case c.Up(id) && rng.Float64() < resign:
				c.Resign(id)
			case !c.Up(id) && rng.Float64() < restart:
				c.Start(id)
			}
		}
		switch {
		case split && rng.Float64() < heal:
			c.Heal()
			split = false
		case !split && n > 1 && rng.Float64() < partition:
			c.Partition(randomGroups(rng, sorted)...)
			split = true
		}
		c.Tick()
		if c.Err() != nil {
			res.Err = c.Err()
			return res
		}
	}

	// Quiet phase: healed, reliable, delays within t_max. Nodes that never
	// started start now; each crashed node restarts or stays down.
	res.QuietAt = c.Now()
	if trace != nil {
		fmt.Fprintf(trace, "%5d  quiet phase: must agree by tick %d\n", c.Now(), c.Now()+b)
	}
	c.Heal()
	if err := c.SetNetwork(Network{MinDelay: 1, MaxDelay: TMax, Unreachable: faulty.Unreachable}); err != nil {
		res.Err = err
		return res
	}
	anyUp := false
	for i, id := range sorted {
		if !started[i] || (!c.Up(id) && rng.IntN(2) == 0) {
			c.Start(id)
		}
		anyUp = anyUp || c.Up(id)
	}
	if !anyUp {
		c.Start(sorted[rng.IntN(n)])
	}
	res.End = res.QuietAt + b + 2*(timing.LeaderTimeoutTicks+timing.CoordinatorTicks)
	since := -1
	for c.Now() < res.End {
		c.Tick()
		if c.Err() != nil {
			res.Err = c.Err()
			return res
		}
		_, _, ok := c.Agreement()
		switch {
		case ok && since < 0:
			since = c.Now()
		case !ok:
			since = -1
		}
		if since < 0 && c.Now() >= res.QuietAt+b {
			res.Err = fmt.Errorf("sim: liveness violated: no agreement on the highest live ID %d ticks after the quiet phase started (tick %d): %s",
				c.Now()-res.QuietAt, c.Now(), c.describe())
			if trace != nil {
				fmt.Fprintf(trace, "%5d  VIOLATION %v\n", c.Now(), res.Err)
			}
			return res
		}
	}
	res.Converged = since - res.QuietAt
	return res
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
