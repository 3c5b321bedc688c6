package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The comparison with hashicorp/raft and the plot come from programs run
// as processes: raftcheck (cmd/raftcheck, this module) drives raftpeer
// peers, and failoverplot draws the plot; raftpeer and failoverplot are
// in the module bench/, so that raft and the plotting library never enter
// this module's dependencies. go tool task bench:build builds all three
// into bin/.

// raftSeries is one timing variant of raft's crash failover, as raftcheck
// -json writes it (durations in nanoseconds).
type raftSeries struct {
	Name   string          `json:"name"`
	N      int             `json:"-"`
	Rounds []time.Duration `json:"rounds"`
	P50    time.Duration   `json:"p50"`
	P90    time.Duration   `json:"p90"`
	P99    time.Duration   `json:"p99"`
	Max    time.Duration   `json:"max"`
}

// maxRaftOutput bounds what is read of raftcheck's JSON.
const maxRaftOutput = 1 << 20

// measureRaft runs raftcheck for a cluster of n peers with both timing
// variants.
func measureRaft(ctx context.Context, cfg config, n, rounds int, out io.Writer) ([]raftSeries, error) {
	path := filepath.Join(cfg.logDir, fmt.Sprintf("raft-%d.json", n))
	cmd := exec.CommandContext(ctx, cfg.raftcheck, "-binary", cfg.raftpeer, "-n", fmt.Sprint(n), "-rounds", fmt.Sprint(rounds), "-json", path)
	logFile, err := os.Create(filepath.Join(cfg.logDir, fmt.Sprintf("raft-%d.log", n)))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("raftcheck -n %d: %w; see %s", n, err, logFile.Name())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRaftOutput))
	if err != nil {
		return nil, err
	}
	var series []raftSeries
	if err := json.Unmarshal(data, &series); err != nil {
		return nil, fmt.Errorf("raftcheck output %s: %w", path, err)
	}
	for i := range series {
		series[i].N = n
		fmt.Fprintf(out, "  %s: %d rounds, crash failover p50 %s\n", series[i].Name, len(series[i].Rounds), ms(series[i].P50))
	}
	return series, nil
}

// raftTable renders our crash failover beside raft's: for each raft
// variant, its quantiles and the ratio of its p50 to each algorithm's at
// the same size (with connection events, then heartbeats alone).
func raftTable(results []*result, raft []raftSeries, markdown bool) string {
	if len(raft) == 0 {
		return ""
	}
	var b strings.Builder
	if markdown {
		b.WriteString("| crash failover | p50 | p90 | p99 | max | raft p50 ÷ ours p50 (connection events; heartbeats alone) |\n|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("crash failover beside hashicorp/raft (raft p50 ÷ ours p50: with connection events; heartbeats alone)\n")
	}
	for _, s := range raft {
		var ratios []string
		for _, r := range results {
			if r.n != s.N || len(r.crash) == 0 {
				continue
			}
			ratio := fmt.Sprintf("%s %.1f×", r.algorithm, float64(s.P50)/float64(quantile(r.crash, 0.5)))
			if len(r.crashNoEvents) > 0 {
				ratio += fmt.Sprintf("; %.1f×", float64(s.P50)/float64(quantile(r.crashNoEvents, 0.5)))
			}
			ratios = append(ratios, ratio)
		}
		if markdown {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.Name, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), strings.Join(ratios, ", "))
		} else {
			fmt.Fprintf(&b, "  %-18s p50 %-10s p90 %-10s p99 %-10s max %-10s  %s\n", s.Name, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), strings.Join(ratios, ", "))
		}
	}
	return b.String()
}

// plotSeries is one series of the failover plot.
type plotSeries struct {
	Name string        `json:"name"`
	P50  time.Duration `json:"p50"`
	P90  time.Duration `json:"p90"`
	Max  time.Duration `json:"max"`
}

// writePlot draws every crash failover measured (ours with and without
// connection events, raft's) into benchmarks.svg in cfg.out.
func writePlot(ctx context.Context, cfg config, results []*result, raft []raftSeries) (string, error) {
	var series []plotSeries
	add := func(name string, ds []time.Duration) {
		if len(ds) > 0 {
			series = append(series, plotSeries{name, quantile(ds, 0.5), quantile(ds, 0.9), slices.Max(ds)})
		}
	}
	for _, r := range results {
		add(header(r), r.crash)
		add(header(r)+", heartbeats alone", r.crashNoEvents)
	}
	for _, s := range raft {
		series = append(series, plotSeries{s.Name, s.P50, s.P90, s.Max})
	}
	if len(series) == 0 {
		return "", nil
	}
	data, err := json.Marshal(series)
	if err != nil {
		return "", err
	}
	in := filepath.Join(cfg.logDir, "failover.json")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(cfg.out, "benchmarks.svg")
	caption := fmt.Sprintf("crash failover, ms (p50, p90, max): %s, %d CPUs, Linux %s, %s, %s",
		cpuModel(), runtime.NumCPU(), kernel(), runtime.Version(), time.Now().UTC().Format(time.DateOnly))
	cmd := exec.CommandContext(ctx, cfg.plot, "-in", in, "-out", path, "-caption", caption)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failoverplot: %w: %s", err, out)
	}
	return path, nil
}

// raftReady is the line raftcheck -steady prints once its peers agree
// (cmd/raftcheck's SteadyReady).
const raftReady = "steady: ready"

// raftLoad is hashicorp/raft's count under one load of the steady state,
// as raftcheck -steady -json writes it.
type raftLoad struct {
	Kind  string `json:"-"`
	Name  string `json:"name"`
	Moves int    `json:"moves"` // the leadership moved to another peer
	Lost  int    `json:"lost"`  // a peer lost the leader
	Err   string `json:"-"`     // why there is no count
}

// raftSteady is a raftcheck -steady run beside a load.
type raftSteady struct {
	cmd  *exec.Cmd
	json string
	log  *os.File
	done chan struct{} // closed when raftcheck's stdout is read to the end
}

// startRaftSteady starts raftcheck -steady for 5 peers with 150 ms
// time-outs and waits until its peers agree, for at most the -timeout.
func startRaftSteady(ctx context.Context, cfg config, kind string) (*raftSteady, error) {
	rs := &raftSteady{json: filepath.Join(cfg.logDir, "raft-steady-"+kind+".json"), done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, cfg.raftcheck, "-binary", cfg.raftpeer, "-n", "5", "-timeouts", "150ms",
		"-steady", cfg.steady.String(), "-json", rs.json)
	log, err := os.Create(filepath.Join(cfg.logDir, "raft-steady-"+kind+".log"))
	if err != nil {
		return nil, err
	}
	rs.log, rs.cmd = log, cmd
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		defer close(rs.done)
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if sc.Text() == raftReady && !once {
				once = true
				close(ready)
			}
		}
	}()
	timer := time.NewTimer(cfg.timeout)
	defer timer.Stop()
	select {
	case <-ready:
		return rs, nil
	case <-rs.done:
		rs.stop()
		return nil, fmt.Errorf("raftcheck -steady ended before its peers agreed; see %s", log.Name())
	case <-timer.C:
	case <-ctx.Done():
	}
	rs.stop()
	return nil, fmt.Errorf("raftcheck -steady: no agreement within %s; see %s", cfg.timeout, log.Name())
}

// stop kills raftcheck (its peers die with it) and waits for it.
func (rs *raftSteady) stop() {
	_ = rs.cmd.Process.Kill()
	<-rs.done
	_ = rs.cmd.Wait()
	rs.log.Close()
}

// finish waits for raftcheck's window to end, for at most grace, and
// reads its count.
func (rs *raftSteady) finish(kind string, grace time.Duration) raftLoad {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-rs.done:
	case <-timer.C:
	}
	rs.stop()
	fail := func(err error) raftLoad { return raftLoad{Kind: kind, Err: err.Error()} }
	if !rs.cmd.ProcessState.Success() {
		return fail(fmt.Errorf("raftcheck -steady: %s; see %s", rs.cmd.ProcessState, rs.log.Name()))
	}
	data, err := os.ReadFile(rs.json)
	if err != nil {
		return fail(err)
	}
	var series []raftLoad
	if err := json.Unmarshal(data, &series); err != nil || len(series) != 1 {
		return fail(fmt.Errorf("raftcheck -steady: bad output %s", rs.json))
	}
	series[0].Kind = kind
	return series[0]
}

func (l raftLoad) String() string {
	if l.Err != "" {
		return "not measured: " + oneLine(l.Err, 200)
	}
	return fmt.Sprintf("%d (%d times a peer lost the leader)", l.Moves, l.Lost)
}

// raftLoadTable renders raft's counts under the loads.
func raftLoadTable(loads []raftLoad, markdown bool) string {
	if len(loads) == 0 {
		return ""
	}
	var b strings.Builder
	if markdown {
		b.WriteString("| load | hashicorp/raft 150 ms, 5 peers: spurious leader changes |\n|---|---|\n")
	} else {
		b.WriteString("steady state beside hashicorp/raft, 150 ms time-outs, 5 peers: spurious leader changes\n")
	}
	for _, l := range loads {
		v := l.String()
		if markdown {
			fmt.Fprintf(&b, "| %s | %s |\n", l.Kind, v)
		} else {
			fmt.Fprintf(&b, "  %-9s %s\n", l.Kind, v)
		}
	}
	return b.String()
}
