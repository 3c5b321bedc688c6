// Command bench measures leader election with real node processes on this
// machine: an embedded NATS server and a cluster of node binaries with
// their default settings, one cluster per algorithm in turn.
//
// For each algorithm it measures
//
//   - cold start: all nodes started at once until they agree on a leader;
//   - crash failover: the leader is killed with SIGKILL until every
//     survivor agrees on the new leader; between rounds the killed node is
//     restarted and the cluster re-converges on it (rejoin);
//   - SIGTERM handoff: SIGTERM to the leader until the survivors agree on
//     the new leader, and how long the old leader took to exit;
//   - messages per election: every message on election.<cluster>.> from
//     the event until the cluster is quiet again, heartbeats excepted;
//   - steady state: a quiet cluster while CPU burners keep every core busy,
//     counting elections started and leader changes.
//
// "Agreed" means every live node's GET /status names the same leader, the
// highest live ID; /status is polled every -poll interval, so times are
// upper bounds with that resolution.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// burnerEnv, set to 1, turns the process into a CPU burner: it spins until
// it is killed. The benchmark starts its burners this way, from its own
// binary.
const burnerEnv = "BATON_BENCH_BURNER"

type config struct {
	binary     string
	nodes      int
	rounds     int
	steady     time.Duration
	algorithms []string
	timeout    time.Duration
	poll       time.Duration
	quiet      time.Duration
	logDir     string
}

func main() {
	if os.Getenv(burnerEnv) == "1" {
		burn()
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

func parseFlags(args []string) (config, error) {
	var c config
	var algorithms string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.binary, "binary", "bin/node", "path of the node binary")
	fs.IntVar(&c.nodes, "nodes", 5, "cluster size, IDs 1..n")
	fs.IntVar(&c.rounds, "rounds", 20, "rounds of crash failover, and of SIGTERM handoff")
	fs.DurationVar(&c.steady, "steady", 60*time.Second, "steady-state duration with busy CPUs; 0 skips it")
	fs.StringVar(&algorithms, "algorithms", "bully,ring", "comma-separated algorithms to measure")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Second, "deadline for a cluster to agree on a leader")
	fs.DurationVar(&c.poll, "poll", 2*time.Millisecond, "interval between /status polls")
	fs.DurationVar(&c.quiet, "quiet", 300*time.Millisecond, "an election is over once no election message was sent for this long")
	fs.StringVar(&c.logDir, "logs", "", "directory for node logs (default: a new temporary directory)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.nodes < 2 {
		return c, fmt.Errorf("-nodes must be at least 2, got %d", c.nodes)
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds must be at least 1, got %d", c.rounds)
	}
	if c.poll <= 0 || c.timeout <= 0 || c.quiet <= 0 || c.steady < 0 {
		return c, errors.New("-poll, -timeout and -quiet must be positive, -steady not negative")
	}
	for a := range strings.SplitSeq(algorithms, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.algorithms = append(c.algorithms, a)
		}
	}
	if len(c.algorithms) == 0 {
		return c, errors.New("-algorithms names no algorithm")
	}
	return c, nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if _, err := os.Stat(cfg.binary); err != nil {
		return fmt.Errorf("node binary: %w (build it with: go tool task build)", err)
	}
	if cfg.logDir == "" {
		dir, err := os.MkdirTemp("", "baton-bench-")
		if err != nil {
			return err
		}
		cfg.logDir = dir
	}
	env, err := newEnvironment(cfg, out)
	if err != nil {
		return err
	}
	defer env.close()

	fmt.Fprintf(out, "bench: %d nodes per cluster, %d rounds, steady state %s, node logs in %s\n",
		cfg.nodes, cfg.rounds, cfg.steady, cfg.logDir)
	var results []*result
	var failed []string
	for _, algorithm := range cfg.algorithms {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(out, "bench: %s\n", algorithm)
		res, err := env.measure(ctx, protocol.Algorithm(algorithm))
		if err != nil {
			fmt.Fprintf(out, "bench: %s: %v\n", algorithm, err)
			failed = append(failed, algorithm)
		}
		results = append(results, res)
	}
	fmt.Fprintln(out)
	printTable(out, cfg, results)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if len(failed) > 0 {
		return fmt.Errorf("incomplete measurements for %s; see the node logs in %s", strings.Join(failed, ", "), cfg.logDir)
	}
	return nil
}
