package sim_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/byzantine"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/sim"
)

var byzantineSpec = sim.ByzantineSpec{
	Name: "byzantine",
	Factory: func(cfg election.Config, cluster string, signer certify.Signer, keys certify.Members) (election.Machine, error) {
		return byzantine.New(byzantine.Config{Config: cfg, Cluster: cluster, Signer: signer, Keys: keys})
	},
	PenaltyFactor: byzantine.PenaltyFactor,
}

// byzantineSizes are the cluster sizes of the byzantine runs: f = 1, 2, 3.
var byzantineSizes = []int{4, 7, 10}

// TestRandomByzantine runs the byzantine algorithm with up to f traitors
// (sim.RunByzantine) over seeds at 4, 7 and 10 members: raceByzantineSeeds
// per size by default (a slice that stays under a minute on two cores
// under the race detector), SIM_BYZANTINE_SEEDS to change it (go tool
// task sim runs 100,000). SIM_BYZANTINE_SIZE=n runs size n alone;
// SIM_BYZANTINE_SEED=N runs seed N alone (of SIM_BYZANTINE_SIZE, or of
// each size) and prints its trace.
func TestRandomByzantine(t *testing.T) {
	seeds := raceByzantineSeeds
	if testing.Short() {
		seeds = min(seeds, 20)
	}
	if v, ok := envInt(t, "SIM_BYZANTINE_SEEDS"); ok {
		seeds = v
	}
	runByzantine(t, byzantineSpec, seeds)
}

// byzantineSpreadSeeds is how many seeds of each size
// TestRandomByzantineSpread runs (5 with -short or the race detector);
// SIM_BYZANTINE_SPREAD_SEEDS changes it. SIM_BYZANTINE_SIZE and
// SIM_BYZANTINE_SEED replay as for TestRandomByzantine.
const byzantineSpreadSeeds = 30

// TestRandomByzantineSpread is TestRandomByzantine with the members
// ranked by election.Spread (ByzantineSpec.Spread): the designated
// leaders follow the rank, and once the traitors fall silent the
// highest-ranked running honest member must lead.
func TestRandomByzantineSpread(t *testing.T) {
	seeds := byzantineSpreadSeeds
	if testing.Short() || raceByzantineSeeds < 200 {
		seeds = 5
	}
	if v, ok := envInt(t, "SIM_BYZANTINE_SPREAD_SEEDS"); ok {
		seeds = v
	}
	spec := byzantineSpec
	spec.Spread = true
	runByzantine(t, spec, seeds)
}

// runByzantine runs seeds seeds of spec at each size, or what
// SIM_BYZANTINE_SIZE and SIM_BYZANTINE_SEED ask.
func runByzantine(t *testing.T, spec sim.ByzantineSpec, seeds int) {
	size, oneSize := envInt(t, "SIM_BYZANTINE_SIZE")
	for _, n := range byzantineSizes {
		if oneSize && n != size {
			continue
		}
		if seed, ok := envInt(t, "SIM_BYZANTINE_SEED"); ok {
			var trace strings.Builder
			res := sim.RunByzantine(uint64(seed), spec, n, &trace)
			t.Log("\n" + trace.String())
			if res.Err != nil {
				t.Fatalf("size %d, seed %d: %v", n, seed, res.Err)
			}
			t.Logf("size %d, seed %d: certified leader %d ticks after settling (bound %d); the highest honest led %d ticks after the traitors fell silent (bound %d); orders %+v, %d order lies",
				n, seed, res.Elected, res.ElectBound, res.Converged, res.Bound, res.Orders, res.OrderLies)
			continue
		}
		runByzantineSize(t, spec, n, seeds)
	}
}

// progressEvery is how often a long run logs how far it got.
const progressEvery = 10000

// runByzantineSize runs count seeds of size n and logs the figures.
func runByzantineSize(t *testing.T, spec sim.ByzantineSpec, n, count int) {
	t.Helper()
	worst, worstSeed := -1, uint64(0)
	highest, highestSeed := -1, uint64(0)
	convictions, lies, traitors := 0, 0, 0
	var orders sim.OrderStats
	orderLies := 0
	var res sim.ByzantineResult
	for seed := uint64(1); seed <= uint64(count); seed++ {
		res = sim.RunByzantine(seed, spec, n, nil)
		if res.Err == nil {
			if res.Elected > worst {
				worst, worstSeed = res.Elected, seed
			}
			if res.Converged > highest {
				highest, highestSeed = res.Converged, seed
			}
			convictions += res.Convictions
			lies += res.Lies
			traitors += len(res.Traitors)
			orders.Issued += res.Orders.Issued
			orders.Checked += res.Orders.Checked
			orders.Decisions += res.Orders.Decisions
			orders.Evidence += res.Orders.Evidence
			orders.Messages += res.Orders.Messages
			orders.Copies += res.Orders.Copies
			orderLies += res.OrderLies
			if seed%progressEvery == 0 && seed < uint64(count) {
				t.Logf("byzantine, %d members: %d seeds so far, no violation; slowest certified leader %d ticks after settling (seed %d); slowest highest honest leader %d ticks after the traitors fell silent (seed %d)",
					n, seed, worst, worstSeed, highest, highestSeed)
			}
			continue
		}
		var trace strings.Builder
		again := sim.RunByzantine(seed, spec, n, &trace)
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
		t.Fatalf("byzantine, size %d, seed %d (members %v, traitors %v): %s violation: %v\nreplay with SIM_BYZANTINE_SIZE=%d SIM_BYZANTINE_SEED=%d go test ./pkg/sim -run '^%s$' -v",
			n, seed, res.Members, res.Traitors, kind, res.Err, n, seed, t.Name())
	}
	if traitors > 0 && lies == 0 {
		t.Errorf("size %d: %d traitors sent no lie: the traitors check nothing", n, traitors)
	}
	if count >= 20 && (orders.Checked == 0 || orderLies == 0 || orders.Evidence == 0) {
		t.Errorf("size %d: %d orders checked, %d order lies, %d proofs found: the orders check nothing", n, orders.Checked, orderLies, orders.Evidence)
	}
	t.Logf("orders, %d members: %d issued, %d of honest leaders decided in time by every running honest member (bound %d ticks), %d decisions, %d messages (%d copies), %d traitors' lies, %d proofs of a lie",
		n, orders.Issued, orders.Checked, sim.OrderBound(n), orders.Decisions, orders.Messages, orders.Copies, orderLies, orders.Evidence)
	name := "byzantine"
	if spec.Spread {
		name += " (spread)"
	}
	t.Logf("%s, %s members: %d seeds, no violation; slowest certified leader %d ticks after settling (seed %d, bound %d); slowest highest honest leader %d ticks after the traitors fell silent (seed %d, bound %d); %d traitors, %d lies, %d convictions",
		name, strconv.Itoa(n), count, worst, worstSeed, res.ElectBound, highest, highestSeed, res.Bound, traitors, lies, convictions)
}
