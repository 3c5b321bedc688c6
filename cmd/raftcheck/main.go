// Command raftcheck measures hashicorp/raft's crash failover with
// raftbench, for each timing variant, and prints the figures; with -json it
// also writes them for cmd/bench (which draws them with failoverplot).
// With -steady D it instead counts, for each timing variant, the leader
// changes of a quiet cluster over D (cmd/bench runs it beside its loads):
// it prints the line SteadyReady once the peers agree, and with -json
// writes the counts.
//
// It runs the raftpeer binary that -binary names, built from the module
// bench/ (go tool task bench:build builds both into bin/):
//
//	go run ./cmd/raftcheck -binary bin/raftpeer -n 5 -rounds 3
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/raftbench"
)

type options struct {
	binary   string
	n        int
	rounds   int
	timeouts []string
	json     string
	wait     time.Duration
	steady   time.Duration
}

// SteadyReady is the line -steady prints once the peers agree: the
// window starts.
const SteadyReady = "steady: ready"

// SteadySeries is one timing variant's counts in the -steady -json
// output, as cmd/bench reads them.
type SteadySeries struct {
	Name  string `json:"name"`
	Moves int    `json:"moves"`
	Lost  int    `json:"lost"`
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "raftcheck:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "raftcheck:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	fs := flag.NewFlagSet("raftcheck", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o options
	var timeouts string
	fs.StringVar(&o.binary, "binary", "bin/raftpeer", "raftpeer binary, built from the module bench/")
	fs.IntVar(&o.n, "n", 5, fmt.Sprintf("peers per cluster, %d to %d", raftbench.MinPeers, raftbench.MaxPeers))
	fs.IntVar(&o.rounds, "rounds", 3, "leader crashes per timing variant")
	fs.StringVar(&timeouts, "timeouts", raftbench.TimeoutsDefault+","+raftbench.Timeouts150ms, "comma-separated timing variants")
	fs.StringVar(&o.json, "json", "", "write the results to this file as JSON (a list of failover series, durations in nanoseconds)")
	fs.DurationVar(&o.wait, "wait", raftbench.DefaultWait, "bound on each wait for agreement")
	fs.DurationVar(&o.steady, "steady", 0, "instead of crashes, count the leader changes of a quiet cluster over this window (0: crashes)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for t := range strings.SplitSeq(timeouts, ",") {
		if t != raftbench.TimeoutsDefault && t != raftbench.Timeouts150ms {
			return o, fmt.Errorf("-timeouts: %q: want %s or %s", t, raftbench.TimeoutsDefault, raftbench.Timeouts150ms)
		}
		o.timeouts = append(o.timeouts, t)
	}
	if o.binary == "" {
		return o, errors.New("-binary: the raftpeer binary is required (go tool task bench:build)")
	}
	return o, nil // raftbench checks -n, -rounds and -wait
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.steady != 0 {
		return runSteady(ctx, o, out)
	}
	var results []Series
	var lines []string
	for _, t := range o.timeouts {
		res, err := raftbench.MeasureCrash(ctx, raftbench.Config{
			Binary: o.binary, N: o.n, Timeouts: t, Rounds: o.rounds, Wait: o.wait, Log: out,
		})
		if err != nil {
			return err
		}
		name := fmt.Sprintf("raft %s %d", t, o.n)
		lines = append(lines, fmt.Sprintf("%-18s rounds %d  p50 %s  p90 %s  p99 %s  max %s",
			name, len(res.Rounds), ms(res.P50), ms(res.P90), ms(res.P99), ms(res.Max)))
		results = append(results, Series{Name: name, Rounds: res.Failovers(), P50: res.P50, P90: res.P90, P99: res.P99, Max: res.Max})
	}
	if o.json != "" {
		data, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.json, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "crash failover (kill the leader until every survivor names the new one):")
	for _, l := range lines {
		fmt.Fprintln(out, "  "+l)
	}
	return nil
}

// Series is one timing variant's results in the -json output, as cmd/bench
// reads them.
type Series struct {
	Name               string          `json:"name"`
	Rounds             []time.Duration `json:"rounds"`
	P50, P90, P99, Max time.Duration   `json:"-"`
	P50ns              int64           `json:"p50"`
	P90ns              int64           `json:"p90"`
	P99ns              int64           `json:"p99"`
	Maxns              int64           `json:"max"`
}

// MarshalJSON writes the quantiles in nanoseconds.
func (s Series) MarshalJSON() ([]byte, error) {
	type plain Series
	p := plain(s)
	p.P50ns, p.P90ns, p.P99ns, p.Maxns = int64(s.P50), int64(s.P90), int64(s.P99), int64(s.Max)
	return json.Marshal(p)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// runSteady counts each timing variant's leader changes over o.steady.
func runSteady(ctx context.Context, o options, out io.Writer) error {
	var results []SteadySeries
	for _, t := range o.timeouts {
		res, err := raftbench.MeasureSteady(ctx, raftbench.Config{Binary: o.binary, N: o.n, Timeouts: t, Wait: o.wait},
			o.steady, func() { fmt.Fprintln(out, SteadyReady) })
		if err != nil {
			return err
		}
		s := SteadySeries{Name: fmt.Sprintf("raft %s %d", t, o.n), Moves: res.Moves, Lost: res.Lost}
		fmt.Fprintf(out, "%s: %d leader changes, %d times a peer lost the leader, over %s\n", s.Name, s.Moves, s.Lost, o.steady)
		results = append(results, s)
	}
	if o.json == "" {
		return nil
	}
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(o.json, append(data, '\n'), 0o644)
}
