package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
)

// manySectionHeading is the heading of the many-elections section of
// benchmarks.md.
const manySectionHeading = "## Many elections in one process"

// histogram is a Prometheus histogram: the cumulative count at each
// upper bound, ascending, +Inf last.
type histogram struct {
	bounds []float64 // upper bounds, +Inf included
	counts []float64 // cumulative
	count  float64
}

// histogramDelta is the histogram name of after less that of before
// (before may lack it: a histogram that did not exist yet).
func histogramDelta(before, after localcluster.Metrics, name string) histogram {
	var h histogram
	prefix := name + `_bucket{le="`
	for series := range after {
		rest, ok := strings.CutPrefix(series, prefix)
		if !ok {
			continue
		}
		le, ok := strings.CutSuffix(rest, `"}`)
		if !ok {
			continue
		}
		b, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		series := prefix + formatLe(b) + `"}`
		h.counts = append(h.counts, after[series]-before[series])
	}
	h.count = after[name+"_count"] - before[name+"_count"]
	return h
}

// formatLe writes an upper bound as Prometheus's client does.
func formatLe(b float64) string {
	if math.IsInf(b, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(b, 'g', -1, 64)
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket that holds it, the highest finite
// bound if that is +Inf's; NaN without observations.
func (h histogram) quantile(q float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return math.NaN()
	}
	total := h.counts[len(h.counts)-1]
	rank := q * total
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank && c > 0 {
			if math.IsInf(h.bounds[i], 1) {
				if i == 0 {
					return math.NaN()
				}
				return h.bounds[i-1]
			}
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return h.bounds[len(h.bounds)-1]
}

// spread is the min, max and population standard deviation of xs.
func spread(xs []int) (lo, hi int, sd float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	lo, hi = slices.Min(xs), slices.Max(xs)
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	m := sum / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (float64(x) - m) * (float64(x) - m)
	}
	return lo, hi, math.Sqrt(v / float64(len(xs)))
}

// Reference costs, computed from published figures, not measured: a
// Kubernetes Lease renewed every 2 s (client-go's retry period, about 30
// writes a minute), and a NATS KV election renewing its key as often.
const (
	leaseWritesPerMinute = 30
	kvRenewal            = 2 * time.Second
)

// leaseWrites is the writes per second into etcd of n elections by
// Kubernetes Leases.
func leaseWrites(n int) float64 { return float64(n) * leaseWritesPerMinute / 60 }

// kvWrites is the replicated writes per second of n NATS KV elections.
func kvWrites(n int) float64 { return float64(n) / kvRenewal.Seconds() }

// manyRow is one row of the many-elections table.
type manyRow struct {
	name, target string
	cell         func(r *manyResult) string
}

// single is the result at one election of r's algorithm, nil if none.
func single(all []*manyResult, r *manyResult) *manyResult {
	for _, o := range all {
		if o.algorithm == r.algorithm && o.n == 1 {
			return o
		}
	}
	return nil
}

func manyRows(all []*manyResult) []manyRow {
	measured := func(r *manyResult) bool { return len(r.cpu) > 0 }
	dash := "-"
	return []manyRow{
		{"start: until every election has an agreed leader", "", func(r *manyResult) string {
			if r.start == 0 && r.stopped != "" {
				return "did not settle; " + r.stopped
			}
			if r.start == 0 {
				return fmt.Sprintf("did not settle within %s", r.bound.Round(time.Second))
			}
			return ms(r.start)
		}},
		{"leaders per process, min / max / stddev", "", func(r *manyResult) string {
			if len(r.leaders) == 0 {
				return dash
			}
			lo, hi, sd := spread(r.leaders)
			return fmt.Sprintf("%d / %d / %.1f", lo, hi, sd)
		}},
		{"idle CPU per process, mean (max)", "flat in n", func(r *manyResult) string {
			if !measured(r) {
				return dash
			}
			return fmt.Sprintf("%.1f%% (%.1f%%)", meanFloat(r.cpu), slices.Max(r.cpu))
		}},
		{"idle CPU per process per 1,000 elections", "", func(r *manyResult) string {
			if !measured(r) || r.n == 1 {
				return dash
			}
			return fmt.Sprintf("%.1f%%", meanFloat(r.cpu)*1000/float64(r.n))
		}},
		{"CPU of the benchmark process (the NATS server), idle", "", func(r *manyResult) string {
			if !measured(r) {
				return dash
			}
			return fmt.Sprintf("%.1f%%", r.benchCPU)
		}},
		{"resident memory per process, mean (max)", "", func(r *manyResult) string {
			if len(r.rss) == 0 {
				return dash
			}
			return fmt.Sprintf("%.1f (%.1f) MiB", float64(meanInt(r.rss))/(1<<20), float64(slices.Max(r.rss))/(1<<20))
		}},
		{"memory per election (RSS above 1 election, / n)", "", func(r *manyResult) string {
			s := single(all, r)
			if !measured(r) || r.n == 1 || s == nil || len(s.rss) == 0 {
				return dash
			}
			return fmt.Sprintf("%.0f KiB", float64(meanInt(r.rss)-meanInt(s.rss))/float64(r.n)/1024)
		}},
		{"NATS server messages in / out per second, idle", "", func(r *manyResult) string {
			if !measured(r) {
				return dash
			}
			return fmt.Sprintf("%.0f / %.0f", r.serverIn, r.serverOut)
		}},
		{"election messages sent per second, idle, all processes", "", func(r *manyResult) string {
			if !measured(r) {
				return dash
			}
			return fmt.Sprintf("%.0f", r.sent)
		}},
		{"batches / batched messages per second, idle", "", func(r *manyResult) string {
			if !measured(r) {
				return dash
			}
			return fmt.Sprintf("%.0f / %.0f", r.batches, r.batched)
		}},
		{"load average at the end of the idle window (1, 5, 15 min)", "", func(r *manyResult) string {
			if r.loadAvg == "" {
				return dash
			}
			return r.loadAvg
		}},
		{"failover: elections the killed process led", "", func(r *manyResult) string {
			if r.led == 0 {
				return dash
			}
			return fmt.Sprintf("%d (node %d)", r.led, r.killed)
		}},
		{"failover until agreed again p50 / p90 / max", "", func(r *manyResult) string {
			if len(r.failover) == 0 {
				return dash
			}
			s := fmt.Sprintf("%s / %s / %s", ms(quantile(r.failover, 0.5)), ms(quantile(r.failover, 0.9)), ms(quantile(r.failover, 1)))
			if r.unagreed > 0 {
				s += fmt.Sprintf("; %d not agreed within %s", r.unagreed, r.bound.Round(time.Second))
			}
			return s
		}},
		{"failover p90 / p90 at 1 election", "<= 2×", func(r *manyResult) string {
			s := single(all, r)
			if len(r.failover) == 0 || r.unagreed > 0 || s == nil || len(s.failover) == 0 {
				return dash
			}
			ratio := float64(quantile(r.failover, 0.9)) / float64(quantile(s.failover, 0.9))
			mark := " ✓"
			if ratio > 2 {
				mark = " ✗"
			}
			return fmt.Sprintf("%.1f×%s", ratio, mark)
		}},
		{"status polled every", "", func(r *manyResult) string { return ms(r.poll) }},
		{"observer lag over the failover p50 / p90 (records)", "", func(r *manyResult) string {
			if r.lagCount == 0 || len(r.observerLag) < 2 {
				return dash
			}
			return fmt.Sprintf("%s / %s (%d)", secMS(r.observerLag[0]), secMS(r.observerLag[1]), r.lagCount)
		}},
		{"reference, computed: Kubernetes Lease writes/s into etcd", "", func(r *manyResult) string {
			return fmt.Sprintf("%g", leaseWrites(r.n))
		}},
		{"reference, computed: NATS KV replicated writes/s", "", func(r *manyResult) string {
			return fmt.Sprintf("%g", kvWrites(r.n))
		}},
	}
}

// secMS renders seconds as milliseconds.
func secMS(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", s*1000)
}

// manyHeader is the column heading of r.
func manyHeader(r *manyResult) string {
	return fmt.Sprintf("%s %s", r.algorithm, thousands(r.n))
}

// thousands writes n with commas every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// manyTable is the Markdown table of results.
func manyTable(all []*manyResult) string {
	var b strings.Builder
	b.WriteString("| | target |")
	for _, r := range all {
		fmt.Fprintf(&b, " %s |", manyHeader(r))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(all)) + "\n")
	for _, rw := range manyRows(all) {
		fmt.Fprintf(&b, "| %s | %s |", rw.name, rw.target)
		for _, r := range all {
			fmt.Fprintf(&b, " %s |", rw.cell(r))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// manyIntro explains the section's table.
const manyIntro = `Five node processes (static members 1..5, default timing, ` +
	"`ELECTION_RANK=spread`, `ELECTION_BATCH_WINDOW` 1 ms), each in the same n elections (`ELECTION_CLUSTERS`), " +
	"on the embedded NATS server. Start: every process started at once, until every process's `/elections` names " +
	"the same leader for every election. Leaders per process: `election_is_leader` of each. Idle: over a quiet window " +
	"3 s after the start agreed (13 s for Bully and the ring, whose leaders send heartbeats every second for ten seconds after their claims before they go quiet): each process's CPU (% of one core) and resident memory; memory per election is the mean " +
	"RSS above that of the run at 1 election of the same algorithm, divided by n; the NATS server's messages in and out " +
	"(its varz: out includes the observer's deliveries); the processes' `election_messages_sent_total`, " +
	"`election_batches_sent_total` and `election_batched_messages_total`. Failover: SIGKILL of the process that leads the " +
	"most elections, then, for each election it led, the time until every survivor's `/elections` names the same new " +
	"leader: once polling every process's `/elections` finds them agreed, the latest `since` of their statuses (when each " +
	"came to name it, on the machine's one clock), so that the poll's interval (in the table, it grows with n) does not " +
	"add to the time; at 1 election the " +
	"failover is repeated 10 times (restart, agreement, kill). Observer lag: `observer_record_lag_seconds` over the " +
	"failover, from its histogram buckets (interpolated). The references are **computed, not measured**: a Kubernetes " +
	"Lease renews about 30 times a minute (client-go's 2 s retry period), n·30/60 writes/s into etcd (whose keepalives " +
	"broke at 40–60k leases on three 8-core machines, etcd#11886); a NATS KV election writes its key once per renewal, " +
	"n / 2 s replicated writes/s at the same period. The machine is shared: the load average is that of the whole machine."

// manyBlock is the section: its heading, what was run, the table and
// the errors.
func manyBlock(cfg config, all []*manyResult, took time.Duration) string {
	var b strings.Builder
	b.WriteString(manySectionHeading + "\n\n")
	var algs []string
	for _, a := range manyAlgorithms(cfg.algorithms) {
		var ns []string
		for _, n := range cfg.electionsOf(a) {
			ns = append(ns, thousands(n))
		}
		algs = append(algs, fmt.Sprintf("%s at %s elections", a, strings.Join(ns, ", ")))
	}
	fmt.Fprintf(&b, "Measured by `%s` on %s: %s, %d CPUs, Linux %s, %s; %s; idle window %s. It took %s.\n\n",
		cfg.command, time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), kernel(), runtime.Version(),
		strings.Join(algs, "; "), cfg.idle, took.Round(time.Second))
	b.WriteString(manyIntro + "\n\n")
	b.WriteString(manyTable(all))
	for _, r := range all {
		if r.err != nil {
			fmt.Fprintf(&b, "\n**%s incomplete:** %s\n", manyHeader(r), oneLine(r.err.Error(), 300))
		}
	}
	return b.String()
}

// writeManyMarkdown puts the many-elections section into benchmarks.md
// in cfg.out, in place of the old one, leaving the rest as it is.
func writeManyMarkdown(cfg config, all []*manyResult, took time.Duration) (string, error) {
	return rewriteBenchmarks(cfg, func(doc string) string {
		return insertSection(doc, manySectionHeading, manyBlock(cfg, all, took))
	})
}

// rewriteBenchmarks rewrites benchmarks.md in cfg.out (a new one if it
// is missing) with edit, which changes one section and keeps the rest,
// and returns its path.
func rewriteBenchmarks(cfg config, edit func(doc string) string) (string, error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(cfg.out, "benchmarks.md")
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	doc := string(old)
	if doc == "" {
		doc = "# Benchmarks\n"
	}
	doc = edit(doc)
	return path, os.WriteFile(path, []byte(strings.TrimRight(doc, "\n")+"\n"), 0o644)
}

// keepManySection carries the many-elections section of the
// benchmarks.md at path, if any, into doc, its new content.
func keepManySection(path string, doc []byte) ([]byte, error) {
	return keepSection(path, doc, manySectionHeading)
}
