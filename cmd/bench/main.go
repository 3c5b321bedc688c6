// Command bench measures leader election with real node processes on this
// machine: an embedded NATS server (with JetStream, for the observer) and,
// for every algorithm and cluster size, a cluster of node binaries with
// their default settings.
//
// Each algorithm has its sizes (-sizes): by default bully, ring and paxos
// at 5, 25 and 101 nodes, byzantine at 4, 7 and 25. For each algorithm and
// size it measures
//
//   - cold start: all nodes started at once until they agree on the
//     highest ID, and how many leaderships were announced meanwhile;
//   - crash failover: the leader is killed with SIGKILL until every
//     survivor agrees on the new leader; the killed node is then restarted
//     and the cluster re-converges on it (rejoin);
//   - hang failover: the leader is stopped with SIGSTOP until the others
//     agree on another; then SIGCONT, and the cluster re-converges on it;
//   - SIGTERM hand-over: SIGTERM to the leader until the survivors agree,
//     and how long the old leader took to exit;
//   - messages per election: every message on the cluster's subjects from
//     the event until the cluster is quiet again, the steady traffic
//     (heartbeats, lease renewals) excepted, counted by a subscriber (the
//     publications) and at the server (the deliveries, with the steady
//     rate subtracted), beside the bound the simulator checks;
//   - idle: CPU share and resident memory of each node, and the steady
//     messages per second of the cluster, over a quiet window;
//   - the observer's lag from a leader's announcement to its record.
//
// With -steady, it then runs one cluster per algorithm, each at its
// smallest size, at once, loads the host with each load of -load in turn
// (load.go: busy processes, fsync storms, memory pressure, a storm of
// fork/exec, a CPU-throttled cgroup, all together) and counts spurious
// leader changes, those while no member failed: there must be none.
//
// "Agreed" means every live node's GET /status names the same leader, the
// highest live ID. The benchmark follows every node's /status with long
// polls (GET /status?wait= with If-None-Match), so it sees each change as
// it happens without loading the machine with polls; a time is when the
// last node's change reached the benchmark.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/procstat"
	"github.com/baton-election/baton/pkg/protocol"
)

type config struct {
	binary     string
	observer   string // observer binary; "" skips the observer's lag
	raftcheck  string // raftcheck binary (cmd/raftcheck); "" skips raft
	raftpeer   string // raftpeer binary for raftcheck
	raftSizes  []int
	plot       string                       // failoverplot binary (bench module); "" draws no plot
	plan       map[protocol.Algorithm][]int // sizes per algorithm, ascending
	sizes      []int                        // every size of plan, ascending
	rounds     map[int]int                  // rounds per size of sizes
	preset     map[int]int                  // quickRounds or fullRounds
	steady     time.Duration
	loads      []string // the steady state's scenarios (load.go), each for steady
	order      string
	idle       time.Duration
	algorithms []protocol.Algorithm
	timeout    time.Duration
	quiet      time.Duration
	logDir     string
	out        string // directory for benchmarks.md; "" writes none
	// static and dynamic say which membership -membership measures:
	// static clusters (the main table), dynamic ones (dynamic.go), or
	// both.
	static, dynamic bool
	// elections are the numbers of elections of the many-elections
	// section (elections.go); electionsOnly says -elections was given,
	// and the run measures that section alone.
	elections     []int
	electionsOwn  map[protocol.Algorithm][]int
	electionsOnly bool
	command       string // the command line, for benchmarks.md
}

func main() {
	if os.Getenv(loaderEnv) != "" {
		// A loader of the steady state (load.go), started by the
		// benchmark from its own binary.
		os.Exit(loaderMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// The two presets: quick (the default) and -full.
var (
	quickRounds = map[int]int{5: 5, 25: 3, 101: 2}
	fullRounds  = map[int]int{5: 20, 25: 10, 101: 5}
)

// roundsAt is the rounds of a cluster of n nodes: those of the plan's
// size n, or, for a size outside the plan (raft's), as the preset would
// give it.
func (c config) roundsAt(n int) int {
	if r, ok := c.rounds[n]; ok {
		return r
	}
	return roundsAt(c.preset, n)
}

func parseFlags(args []string) (config, error) {
	var c config
	var algorithms, sizes, loads, membership, elections string
	var rounds int
	var full bool
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.binary, "binary", "bin/node", "path of the node binary")
	fs.StringVar(&c.observer, "observer", "bin/observer", `path of the observer binary ("" skips the observer's lag)`)
	fs.StringVar(&c.raftcheck, "raftcheck", "", `path of raftcheck, built from cmd/raftcheck ("" skips the comparison with hashicorp/raft)`)
	fs.StringVar(&c.raftpeer, "raftpeer", "bin/raftpeer", "path of raftpeer, built from the bench module")
	fs.StringVar(&c.plot, "plot", "", `path of failoverplot, built from the bench module ("" draws no plot)`)
	fs.StringVar(&sizes, "sizes", defaultSizes, `cluster sizes (IDs are 1..n), lists separated by ";": "n,n,…" for every algorithm without a list of its own, "algorithm=n,n,…" for one`)
	fs.IntVar(&rounds, "rounds", 0, "rounds of each failover (0: 5 below 25 nodes, 3 below 101, 2 from 101; with -full 20, 10 and 5)")
	fs.BoolVar(&full, "full", false, "more rounds, and 10 minutes of steady state with every core busy")
	fs.DurationVar(&c.steady, "steady", 0, "steady state under load, every algorithm's cluster at once, each at its smallest size, for this long per load (0 skips it; -full: 10m)")
	fs.StringVar(&loads, "load", "", `loads of the steady state, each on its own for -steady: comma-separated, of cpu, fsync, memory, procs, cgroup, together (all at once), or all (every one, then together); default cpu`)
	fs.DurationVar(&c.idle, "idle", 5*time.Second, "quiet window over which idle CPU, memory and steady traffic are measured")
	fs.StringVar(&c.order, "order", orderShuffle, `order in which a cluster's processes are started: "ids" (lowest first, one at a time) or "shuffle" (random, several at a time)`)
	fs.StringVar(&algorithms, "algorithms", "bully,ring,paxos,byzantine", "comma-separated algorithms to measure")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "deadline for a cluster to agree on a leader")
	fs.DurationVar(&c.quiet, "quiet", 300*time.Millisecond, "an election is over once no election message was sent for this long")
	fs.StringVar(&c.logDir, "logs", "", "directory for node logs (default: a new temporary directory)")
	fs.StringVar(&c.out, "out", "", "directory to write benchmarks.md into (default: none)")
	fs.StringVar(&membership, "membership", membershipStatic, `clusters to measure, comma-separated: "static" (the main table), "dynamic" (members that come and go, ELECTION_MEMBERSHIP=dynamic; bully, ring and paxos), or both; with dynamic, -out writes only the section "Members that come and go" of benchmarks.md`)
	fs.StringVar(&elections, "elections", defaultElections, `numbers of elections of the many-elections section (5 processes each in n elections) for bully, ring and paxos of -algorithms, lists separated by ";": "n,n,…" for every algorithm without a list of its own, "algorithm=n,n,…" for one; given, the run measures that section alone and -out writes only it ("none" skips it)`)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.command = strings.Join(append([]string{"bench"}, args...), " ")
	var err error
	if c.elections, c.electionsOwn, err = parseElections(elections); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.electionsOnly = c.electionsOnly || f.Name == "elections" })
	if c.electionsOnly && len(c.elections) == 0 && len(c.electionsOwn) == 0 {
		c.electionsOnly = false
	}
	if c.static, c.dynamic, err = parseMembership(membership); err != nil {
		return c, err
	}
	if c.dynamic && c.steady > 0 {
		return c, errors.New("-membership dynamic measures quiet clusters: -steady is for the static benchmark alone")
	}
	if rounds < 0 {
		return c, fmt.Errorf("-rounds must not be negative, got %d", rounds)
	}
	c.preset = quickRounds
	if full {
		c.preset = fullRounds
		if c.steady == 0 && !c.dynamic {
			c.steady = 10 * time.Minute
		}
	}
	if c.timeout <= 0 || c.quiet <= 0 || c.idle <= 0 || c.steady < 0 {
		return c, errors.New("-timeout, -quiet and -idle must be positive, -steady not negative")
	}
	if c.loads, err = parseLoads(loads); err != nil {
		return c, err
	}
	if len(c.loads) > 0 && c.steady == 0 {
		return c, errors.New("-load needs -steady, the duration of each load")
	}
	if len(c.loads) == 0 && c.steady > 0 {
		c.loads = []string{loadCPU}
	}
	for a := range strings.SplitSeq(algorithms, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		alg := protocol.Algorithm(a)
		if !slices.Contains(protocol.Algorithms, alg) {
			return c, fmt.Errorf("-algorithms: %q is not one of %v", a, protocol.Algorithms)
		}
		if slices.Contains(c.algorithms, alg) {
			return c, fmt.Errorf("-algorithms: %s twice", alg)
		}
		c.algorithms = append(c.algorithms, alg)
	}
	if len(c.algorithms) == 0 {
		return c, errors.New("-algorithms names no algorithm")
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "sizes" })
	plan, err := parseSizes(sizes, c.algorithms, explicit)
	if err != nil {
		return c, err
	}
	c.plan, c.sizes = plan, allSizes(plan)
	if c.dynamic {
		if len(dynamicAlgorithms(c.algorithms)) == 0 {
			return c, errors.New("-membership dynamic: byzantine, whose member set changes by certified decisions, is not measured with dynamic membership; measure bully, ring or paxos")
		}
		if err := checkDynamicSizes(c.algorithms, c.plan); err != nil {
			return c, err
		}
	}
	c.rounds = make(map[int]int)
	for _, n := range c.sizes {
		c.rounds[n] = rounds
		if rounds == 0 {
			c.rounds[n] = roundsAt(c.preset, n)
		}
	}
	c.raftSizes = []int{5}
	if full {
		c.raftSizes = []int{5, 25}
	}
	if c.order != orderIDs && c.order != orderShuffle {
		return c, fmt.Errorf("-order: %q is not %q or %q", c.order, orderIDs, orderShuffle)
	}
	return c, nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if _, err := os.Stat(cfg.binary); err != nil {
		return fmt.Errorf("node binary: %w (build it with: go tool task build)", err)
	}
	for _, tool := range []string{cfg.raftcheck, cfg.plot} {
		if tool == "" {
			continue
		}
		if _, err := os.Stat(tool); err != nil {
			return fmt.Errorf("%w (build it with: go tool task bench:build)", err)
		}
	}
	if cfg.raftcheck != "" {
		if _, err := os.Stat(cfg.raftpeer); err != nil {
			return fmt.Errorf("raftpeer: %w (build it with: go tool task bench:build)", err)
		}
	}
	if cfg.observer != "" {
		if _, err := os.Stat(cfg.observer); err != nil {
			return fmt.Errorf("observer binary: %w (build it with: go tool task build, or pass -observer \"\")", err)
		}
	}
	if cfg.logDir == "" {
		dir, err := os.MkdirTemp("", "baton-bench-")
		if err != nil {
			return err
		}
		cfg.logDir = dir
	} else if err := os.MkdirAll(cfg.logDir, 0o755); err != nil {
		return fmt.Errorf("-logs: %w", err)
	}
	env, err := newEnvironment(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer env.close()

	fmt.Fprintf(out, "bench: %s; %s; steady state %s; node logs in %s\n",
		planText(cfg.algorithms, cfg.plan), roundsText(cfg.rounds), cfg.steady, cfg.logDir)
	started := time.Now()
	use := readCPUUse()
	var results []*result
	var failed []string
	for _, c := range columns(cfg.algorithms, cfg.plan) {
		if ctx.Err() != nil || !cfg.static || cfg.electionsOnly {
			break
		}
		fmt.Fprintf(out, "bench: %s, %d nodes\n", c.algorithm, c.n)
		res, err := env.measure(ctx, c.algorithm, c.n)
		if err != nil {
			fmt.Fprintf(out, "bench: %s, %d nodes: %v\n", c.algorithm, c.n, err)
			failed = append(failed, fmt.Sprintf("%s/%d", c.algorithm, c.n))
		}
		results = append(results, res)
	}
	var dyns []*dynResult
	if cfg.dynamic && !cfg.electionsOnly {
		if slices.Contains(cfg.algorithms, protocol.Byzantine) {
			fmt.Fprintln(out, "bench: byzantine is measured with static membership only")
		}
		for _, c := range columns(dynamicAlgorithms(cfg.algorithms), cfg.plan) {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(out, "bench: %s, %d members, dynamic membership\n", c.algorithm, c.n)
			res, err := env.measureDynamic(ctx, c.algorithm, c.n)
			if err != nil {
				fmt.Fprintf(out, "bench: %s, %d members, dynamic membership: %v\n", c.algorithm, c.n, err)
				failed = append(failed, fmt.Sprintf("%s/%d dynamic", c.algorithm, c.n))
			}
			dyns = append(dyns, res)
		}
	}
	var raft []raftSeries
	if cfg.electionsOnly {
		// The many-elections section alone.
	} else if cfg.raftcheck != "" && cfg.dynamic {
		// The section of members that come and go compares with the
		// static clusters, not with raft.
		fmt.Fprintln(out, "bench: -membership dynamic: hashicorp/raft not measured")
	} else if cfg.raftcheck != "" {
		for _, n := range cfg.raftSizes {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(out, "bench: hashicorp/raft, %d peers\n", n)
			series, err := measureRaft(ctx, cfg, n, cfg.roundsAt(n), out)
			if err != nil {
				fmt.Fprintf(out, "bench: %v\n", err)
				failed = append(failed, fmt.Sprintf("raft/%d", n))
				continue
			}
			raft = append(raft, series...)
		}
	}
	if cfg.steady > 0 && ctx.Err() == nil && !cfg.electionsOnly {
		if err := env.steadyState(ctx, results); err != nil {
			fmt.Fprintf(out, "bench: steady state: %v\n", err)
			failed = append(failed, "steady state")
		}
	}
	var many []*manyResult
	if !cfg.dynamic || cfg.electionsOnly {
		var err error
		var partial func([]*manyResult)
		if cfg.out != "" && cfg.electionsOnly {
			// Written after each run: a later one that overloads the
			// machine does not lose the earlier ones.
			partial = func(so []*manyResult) {
				if _, err := writeManyMarkdown(cfg, so, time.Since(started)); err != nil {
					fmt.Fprintf(out, "bench: %v\n", err)
				}
			}
		}
		many, err = env.manyElections(ctx, partial)
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	fmt.Fprintln(out)
	if len(results) > 0 {
		printTable(out, results)
	}
	if len(many) > 0 {
		fmt.Fprintln(out)
		fmt.Fprint(out, manyTable(many))
	}
	if len(dyns) > 0 {
		fmt.Fprintln(out)
		printDynTable(out, results, dyns)
	}
	fmt.Fprint(out, raftTable(results, raft, false))
	fmt.Fprint(out, raftLoadTable(env.raftLoads, false))
	fmt.Fprintf(out, "took %s\n", time.Since(started).Round(time.Second))
	if cfg.out != "" && cfg.electionsOnly {
		path, err := writeManyMarkdown(cfg, many, time.Since(started))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote the section %q of %s\n", manySectionHeading, path)
	} else if cfg.out != "" && cfg.dynamic {
		// The section of members that come and go alone: the main table
		// stays that of the last run of the static benchmark.
		// The observers still run: their CPU is the benchmark's.
		var observers time.Duration
		for _, o := range env.observers {
			if c, err := procstat.ReadCPU(o.cmd.Process.Pid); err == nil {
				observers += time.Duration(c.Ticks) * time.Second / procstat.UserHZ
			}
		}
		path, err := writeDynMarkdown(cfg, results, dyns, time.Since(started), use.othersSince(observers))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote the section %q of %s\n", dynSectionHeading, path)
	} else if cfg.out != "" {
		plotPath := ""
		if cfg.plot != "" {
			p, err := writePlot(ctx, cfg, results, raft)
			if err != nil {
				return err
			}
			plotPath = p
		}
		path, err := writeMarkdown(cfg, results, raft, env.raftLoads, plotPath, time.Since(started))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", path)
		if len(many) > 0 {
			if _, err := writeManyMarkdown(cfg, many, time.Since(started)); err != nil {
				return err
			}
		}
		if plotPath != "" {
			fmt.Fprintf(out, "wrote %s\n", plotPath)
		}
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if len(failed) > 0 {
		return fmt.Errorf("incomplete measurements for %s; see the node logs in %s", strings.Join(failed, ", "), cfg.logDir)
	}
	return nil
}
