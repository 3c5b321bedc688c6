package sim_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/bully"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/ring"
	"github.com/baton-election/baton/pkg/sim"
)

// defaultSeeds is how many seeds go test runs per algorithm; SIM_SEEDS
// changes it and SIM_SEED=N runs seed N alone, printing its trace.
const defaultSeeds = 10000

func bullyFactory(cfg election.Config) (election.Machine, error) { return bully.New(cfg) }
func ringFactory(cfg election.Config) (election.Machine, error)  { return ring.New(cfg) }

func TestRandomBully(t *testing.T) { runSeeds(t, bullyFactory) }
func TestRandomRing(t *testing.T)  { runSeeds(t, ringFactory) }

func runSeeds(t *testing.T, factory sim.Factory) {
	if s := os.Getenv("SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: %v", s, err)
		}
		var trace strings.Builder
		res := sim.RunSeed(seed, factory, &trace)
		t.Log("\n" + trace.String())
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		t.Logf("seed %d: converged %d ticks after the quiet phase started (bound %d)", seed, res.Converged, res.Bound)
		return
	}
	seeds := uint64(defaultSeeds)
	if testing.Short() {
		seeds = 200
	}
	if s := os.Getenv("SIM_SEEDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEEDS=%q: %v", s, err)
		}
		seeds = n
	}
	worst, worstSeed := -1, uint64(0)
	slack, slackSeed := 1<<30, uint64(0)
	for seed := uint64(1); seed <= seeds; seed++ {
		res := sim.RunSeed(seed, factory, nil)
		if res.Err == nil {
			if res.Converged > worst {
				worst, worstSeed = res.Converged, seed
			}
			if res.Bound-res.Converged < slack {
				slack, slackSeed = res.Bound-res.Converged, seed
			}
			continue
		}
		// Replay with the trace on: the same seed must fail the same way.
		var trace strings.Builder
		again := sim.RunSeed(seed, factory, &trace)
		t.Logf("trace of seed %d:\n%s", seed, trace.String())
		if again.Err == nil || again.Err.Error() != res.Err.Error() {
			t.Errorf("seed %d does not replay: got %v, want %v", seed, again.Err, res.Err)
		}
		t.Fatalf("seed %d (members %v): %v\nreplay with SIM_SEED=%d go test ./pkg/sim -run '%s' -v", seed, res.Members, res.Err, seed, t.Name())
	}
	t.Logf("%d seeds passed; slowest convergence %d ticks after the quiet phase started (seed %d); least margin to the bound %d ticks (seed %d)",
		seeds, worst, worstSeed, slack, slackSeed)
}
