package sim_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/bully"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/paxos"
	"github.com/baton-election/baton/pkg/ring"
	"github.com/baton-election/baton/pkg/sim"
)

// defaultSeeds is how many seeds of small clusters (1 to sim.MaxSmall
// members) go test runs per algorithm; the larger sizes run a share of it
// (see sizes). SIM_SEEDS changes it: SIM_SEEDS=100000 is the on-demand
// run (go tool task sim). SIM_SIZE=n runs one size alone; SIM_SEED=N runs
// seed N alone (of SIM_SIZE, or small) and prints its trace.
const defaultSeeds = 2000

// sizes are the cluster sizes of the random runs, with the share of the
// seeds each gets: 0 is a random small size.
var sizes = []struct{ n, per int }{{0, 1}, {12, 10}, {25, 30}, {51, 100}, {101, 300}}

var (
	bullySpec = sim.Spec{Name: "bully", Factory: func(cfg election.Config) (election.Machine, error) { return bully.New(cfg) }}
	ringSpec  = sim.Spec{Name: "ring", Factory: func(cfg election.Config) (election.Machine, error) { return ring.New(cfg) }}
	paxosSpec = sim.Spec{Name: "paxos", Factory: func(cfg election.Config) (election.Machine, error) { return paxos.New(cfg) }, Leases: true}
)

func TestRandomBully(t *testing.T) { runSeeds(t, bullySpec) }
func TestRandomRing(t *testing.T)  { runSeeds(t, ringSpec) }
func TestRandomPaxos(t *testing.T) { runSeeds(t, paxosSpec) }

// spreadSeeds is how many seeds of small clusters the random runs ranked
// by election.Spread (Spec.Spread) run per algorithm, the larger sizes a
// share of it as in runSeeds (20 with -short or the race detector);
// SIM_SPREAD_SEEDS changes it. SIM_SIZE and SIM_SEED replay as for the
// runs ranked by ID.
const spreadSeeds = 400

func TestRandomBullySpread(t *testing.T) { runSpreadSeeds(t, bullySpec) }
func TestRandomRingSpread(t *testing.T)  { runSpreadSeeds(t, ringSpec) }
func TestRandomPaxosSpread(t *testing.T) { runSpreadSeeds(t, paxosSpec) }

// spread returns spec ranked by election.Spread.
func spread(spec sim.Spec) sim.Spec {
	spec.Spread = true
	return spec
}

func runSpreadSeeds(t *testing.T, spec sim.Spec) {
	seeds := spreadSeeds
	if testing.Short() || raceSeeds < defaultSeeds {
		seeds = 20
	}
	if n, ok := envInt(t, "SIM_SPREAD_SEEDS"); ok {
		seeds = n
	}
	runSeedsOf(t, spread(spec), seeds)
}

func envInt(t *testing.T, name string) (int, bool) {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return v, true
}

func runSeeds(t *testing.T, spec sim.Spec) {
	seeds := raceSeeds
	if testing.Short() {
		seeds = 100
	}
	if n, ok := envInt(t, "SIM_SEEDS"); ok {
		seeds = n
	}
	runSeedsOf(t, spec, seeds)
}

// runSeedsOf runs seeds seeds of small clusters of spec and a share of
// them at each larger size (sizes), or what SIM_SIZE and SIM_SEED ask.
func runSeedsOf(t *testing.T, spec sim.Spec, seeds int) {
	size, oneSize := envInt(t, "SIM_SIZE")
	if seed, ok := envInt(t, "SIM_SEED"); ok {
		var trace strings.Builder
		res := sim.RunSeed(uint64(seed), spec, size, &trace)
		t.Log("\n" + trace.String())
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		t.Logf("seed %d: converged %d ticks after the quiet phase (bound %d), %d messages (limit %d)", seed, res.Converged, res.Bound, res.Messages, res.MessageLimit)
		return
	}
	for _, sz := range sizes {
		if oneSize && sz.n != size {
			continue
		}
		count := max(1, seeds/sz.per)
		if oneSize {
			count = seeds
		}
		runSize(t, spec, sz.n, count)
	}
}

// runSize runs count seeds of size n and logs the figures: the slowest
// convergence, the least margin to the bound, the largest share of the
// message bound used.
func runSize(t *testing.T, spec sim.Spec, n, count int) {
	t.Helper()
	worst, worstSeed := -1, uint64(0)
	slack, slackSeed := 1<<30, uint64(0)
	ratio, ratioSeed := 0.0, uint64(0)
	for seed := uint64(1); seed <= uint64(count); seed++ {
		res := sim.RunSeed(seed, spec, n, nil)
		if res.Err == nil {
			if res.Converged > worst {
				worst, worstSeed = res.Converged, seed
			}
			if res.Bound-res.Converged < slack {
				slack, slackSeed = res.Bound-res.Converged, seed
			}
			if r := float64(res.Messages) / float64(res.MessageLimit); r > ratio {
				ratio, ratioSeed = r, seed
			}
			continue
		}
		// Replay with the trace on: the same seed must fail the same way.
		var trace strings.Builder
		again := sim.RunSeed(seed, spec, n, &trace)
		lines := strings.Split(trace.String(), "\n")
		if len(lines) > 400 {
			lines = append(lines[:50], append([]string{"..."}, lines[len(lines)-350:]...)...)
		}
		t.Logf("trace of seed %d (shortened; replay for all of it):\n%s", seed, strings.Join(lines, "\n"))
		if again.Err == nil || again.Err.Error() != res.Err.Error() {
			t.Errorf("seed %d does not replay: got %v, want %v", seed, again.Err, res.Err)
		}
		kind := "liveness"
		if errors.Is(res.Err, sim.ErrInvariant) {
			kind = "safety"
		}
		t.Fatalf("%s, size %d, seed %d (members %v): %s violation: %v\nreplay with SIM_SIZE=%d SIM_SEED=%d go test ./pkg/sim -run '%s' -v",
			specName(spec), n, seed, res.Members, kind, res.Err, n, seed, t.Name())
	}
	label := strconv.Itoa(n)
	if n == 0 {
		label = "1-" + strconv.Itoa(sim.MaxSmall)
	}
	t.Logf("%s, %s members: %d seeds, no violation; slowest convergence %d ticks after the quiet phase (seed %d); least margin to the bound %d ticks (seed %d); messages up to %.0f%% of the bound (seed %d)",
		specName(spec), label, count, worst, worstSeed, slack, slackSeed, 100*ratio, ratioSeed)
}

// specName names spec in logs: its name, and "spread" for runs ranked by
// election.Spread.
func specName(spec sim.Spec) string {
	if spec.Spread {
		return spec.Name + " (spread)"
	}
	return spec.Name
}
