package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// quantile is the nearest-rank q-quantile of ds; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// mean renders the mean of counts with their range.
func mean(xs []int) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f (%d..%d)", float64(sumInt(xs))/float64(len(xs)), slices.Min(xs), slices.Max(xs))
}

func sumInt[T int | int64](xs []T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

func meanInt[T int | int64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	return sumInt(xs) / T(len(xs))
}

func meanFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// spec is the simulator's view of an algorithm, for its stated bounds.
func spec(a protocol.Algorithm) sim.Spec {
	return sim.Spec{Name: string(a), Leases: a == protocol.Paxos}
}

// row is one line of the table: a cell per result, and, if the project has
// a target for it, whether the cell meets it.
type row struct {
	name   string
	target string
	cell   func(r *result) (string, *bool)
}

// tableRows are the rows of a table of results: every row of rows(), and
// the rows of the loads that some column measured.
func tableRows(results []*result) []row {
	rs := rows()
	for _, rw := range loadRows() {
		for _, r := range results {
			if v, _ := rw.cell(r); v != "-" {
				rs = append(rs, rw)
				break
			}
		}
	}
	return rs
}

// loadRows are the rows of the steady state, one per load.
func loadRows() []row {
	var rs []row
	for _, kind := range loadKinds {
		rs = append(rs, row{
			name:   "steady state, load " + kind + ": spurious leader changes",
			target: "0",
			cell: func(r *result) (string, *bool) {
				i := slices.IndexFunc(r.loads, func(l loadResult) bool { return l.kind == kind })
				if i < 0 {
					return "-", nil
				}
				l := r.loads[i]
				v := fmt.Sprintf("%d (%d to another leader; %d elections, %d announced)", l.newTerms, l.moves, l.elections, l.announced)
				if kind == loadCgroup && strings.Contains(l.note, "skipped") {
					return "skipped", nil
				}
				if l.failed {
					return v + ", a member exited", nil
				}
				return v, yes(l.calm())
			},
		})
	}
	return rs
}

func yes(b bool) *bool { return &b }

// durations is a row of a quantile of durations, with a target that may
// depend on the algorithm and size (0: none).
func durations(name string, ds func(r *result) []time.Duration, q float64, target string, limit func(r *result) time.Duration) row {
	return row{name, target, func(r *result) (string, *bool) {
		d := ds(r)
		if len(d) == 0 {
			return "-", nil
		}
		v := quantile(d, q)
		if limit != nil {
			if l := limit(r); l > 0 {
				return ms(v), yes(v <= l)
			}
		}
		return ms(v), nil
	}}
}

// messages is a row of message counts with the bound the simulator
// checks: the worst case of one election of the whole cluster, or of one
// node starting; the target is twice it at most.
func messages(name string, xs func(r *result) []int, bound func(s sim.Spec, n int) int) row {
	return row{name, "<= 2× bound", func(r *result) (string, *bool) {
		x := xs(r)
		if len(x) == 0 {
			return "-", nil
		}
		b := bound(spec(r.algorithm), r.n)
		return fmt.Sprintf("%s / %d", mean(x), b), yes(slices.Max(x) <= 2*b)
	}}
}

// checks is a row of signature checks per election, for clusters with
// member keys: "-" without any.
func checks(name string, xs func(r *result) []int) row {
	return row{name, "", func(r *result) (string, *bool) {
		x := xs(r)
		if len(x) == 0 || !r.algorithm.NeedsKeys() {
			return "-", nil
		}
		return mean(x), nil
	}}
}

// atSize gives a limit only at size n.
func atSize(n int, d time.Duration) func(r *result) time.Duration {
	return func(r *result) time.Duration {
		if r.n == n {
			return d
		}
		return 0
	}
}

// leaseless tells the algorithms whose failover waits for no lease
// (Bully and ring): most latency targets are theirs.
func leaseless(a protocol.Algorithm) bool {
	return a == protocol.Bully || a == protocol.Ring
}

func rows() []row {
	crash := func(r *result) []time.Duration { return r.crash }
	hang := func(r *result) []time.Duration { return r.hang }
	unhang := func(r *result) []time.Duration { return r.unhang }
	rejoin := func(r *result) []time.Duration { return r.rejoin }
	handoff := func(r *result) []time.Duration { return r.handoff }
	termExit := func(r *result) []time.Duration { return r.termExit }
	lag := func(r *result) []time.Duration { return r.observerLag }
	crashNoEvents := func(r *result) []time.Duration { return r.crashNoEvents }
	// Targets: with connection events, crash failover p90 <= 25 ms at 5
	// nodes and 100 ms at 101 (Bully and ring), 300 ms at 4 and 7
	// (byzantine, which waits for the old leader's lease); with heartbeats
	// alone, 500 ms at 101; hang p90 <= 250 ms (Bully and ring), 400 ms
	// at 5 (Paxos, whose leases add to the silence).
	crashTarget := func(r *result) time.Duration {
		switch {
		case r.algorithm == protocol.Byzantine && (r.n == 4 || r.n == 7):
			return 300 * time.Millisecond
		case !leaseless(r.algorithm):
			return 0
		case r.n == 5:
			return 25 * time.Millisecond
		case r.n == 101:
			return 100 * time.Millisecond
		}
		return 0
	}
	noEventsTarget := func(r *result) time.Duration {
		if r.n == 101 && leaseless(r.algorithm) {
			return 500 * time.Millisecond
		}
		return 0
	}
	hangTarget := func(r *result) time.Duration {
		switch {
		case leaseless(r.algorithm):
			return 250 * time.Millisecond
		case r.algorithm == protocol.Paxos && r.n == 5:
			return 400 * time.Millisecond
		}
		return 0
	}
	// The targets of SIGTERM hand-over and idle CPU at 5 nodes are the
	// crash-tolerant algorithms'.
	crashTolerantAt5 := func(r *result) bool {
		return r.n == 5 && slices.Contains(protocol.CrashAlgorithms, r.algorithm)
	}
	handoffTarget := func(r *result) time.Duration {
		if crashTolerantAt5(r) {
			return 20 * time.Millisecond
		}
		return 0
	}
	return []row{
		durations("processes launched within", func(r *result) []time.Duration {
			if r.coldStart == 0 {
				return nil
			}
			return []time.Duration{r.spawn}
		}, 1, "", nil),
		durations("cold start to agreed leader, from the first launch", func(r *result) []time.Duration {
			if r.coldStart == 0 {
				return nil
			}
			return []time.Duration{r.coldStart}
		}, 1, "", nil),
		durations("cold start to agreed leader, from the last launch", func(r *result) []time.Duration {
			if r.coldStart == 0 {
				return nil
			}
			return []time.Duration{max(0, r.coldStart-r.spawn)}
		}, 1, "<= 1 s at 101", atSize(101, time.Second)),
		{"announcements at cold start", "", func(r *result) (string, *bool) {
			if r.coldStart == 0 {
				return "-", nil
			}
			return fmt.Sprint(r.coldAnnouncements), nil
		}},
		{"nodes receiving connection events", "all", func(r *result) (string, *bool) {
			if r.coldStart == 0 {
				return "-", nil
			}
			return fmt.Sprintf("%d of %d", r.eventNodes, r.n), yes(r.eventNodes == r.n)
		}},
		durations("crash failover p50", crash, 0.5, "", nil),
		durations("crash failover p90", crash, 0.9, "bully, ring: <= 25 ms at 5, 100 ms at 101; byzantine: <= 300 ms at 4 and 7", crashTarget),
		durations("crash failover p99", crash, 0.99, "", nil),
		durations("crash failover max", crash, 1, "", nil),
		durations("crash failover p50, heartbeats alone", crashNoEvents, 0.5, "", nil),
		durations("crash failover p90, heartbeats alone", crashNoEvents, 0.9, "bully, ring: <= 500 ms at 101", noEventsTarget),
		durations("crash failover max, heartbeats alone", crashNoEvents, 1, "", nil),
		durations("rejoin of the highest ID p50", rejoin, 0.5, "", nil),
		durations("hang failover p50", hang, 0.5, "", nil),
		durations("hang failover p90", hang, 0.9, "bully, ring <= 250 ms; paxos <= 400 ms at 5", hangTarget),
		durations("hang failover max", hang, 1, "", nil),
		durations("resumed leader takes over p50", unhang, 0.5, "", nil),
		durations("SIGTERM hand-over p50", handoff, 0.5, "", nil),
		durations("SIGTERM hand-over p90", handoff, 0.9, "bully, ring, paxos: <= 20 ms at 5", handoffTarget),
		durations("SIGTERM hand-over max", handoff, 1, "", nil),
		durations("SIGTERM to exit max", termExit, 1, "<= 2 s", func(*result) time.Duration { return 2 * time.Second }),
		messages("messages per crash failover / bound", func(r *result) []int { return r.crashMsgs }, sim.MessageBound),
		{"NATS server in / out / bytes in per crash failover", "", func(r *result) (string, *bool) {
			if len(r.crashServerIn) == 0 {
				return "-", nil
			}
			return fmt.Sprintf("%d / %d / %d", meanInt(r.crashServerIn), meanInt(r.crashServerOut), meanInt(r.crashBytes)), nil
		}},
		messages("messages per hang failover / bound", func(r *result) []int { return r.hangMsgs }, sim.MessageBound),
		messages("messages per hand-over / bound", func(r *result) []int { return r.handoffMsgs }, sim.MessageBound),
		messages("messages per rejoin / bound", func(r *result) []int { return r.rejoinMsgs }, sim.StartBound),
		checks("signature checks per crash failover", func(r *result) []int { return r.crashChecks }),
		checks("signature checks per hang failover", func(r *result) []int { return r.hangChecks }),
		checks("signature checks per hand-over", func(r *result) []int { return r.handoffChecks }),
		{"idle CPU per node, mean (max)", "bully, ring, paxos: <= 0.5% at 5", func(r *result) (string, *bool) {
			if len(r.idleCPU) == 0 {
				return "-", nil
			}
			v := fmt.Sprintf("%.2f%% (%.2f%%)", meanFloat(r.idleCPU), slices.Max(r.idleCPU))
			if crashTolerantAt5(r) {
				return v, yes(slices.Max(r.idleCPU) <= 0.5)
			}
			return v, nil
		}},
		{"resident memory per node, mean (max)", "<= 16 MiB at 5", func(r *result) (string, *bool) {
			if len(r.rss) == 0 {
				return "-", nil
			}
			v := fmt.Sprintf("%.1f (%.1f) MiB", float64(meanInt(r.rss))/(1<<20), float64(slices.Max(r.rss))/(1<<20))
			if r.n == 5 {
				return v, yes(slices.Max(r.rss) <= 16<<20)
			}
			return v, nil
		}},
		{"steady messages per second, cluster", "", func(r *result) (string, *bool) {
			if len(r.idleCPU) == 0 {
				return "-", nil
			}
			return fmt.Sprintf("%.0f", r.steadyPerSec), nil
		}},
		{"signature checks per second at idle, cluster", "", func(r *result) (string, *bool) {
			if len(r.idleCPU) == 0 || !r.algorithm.NeedsKeys() {
				return "-", nil
			}
			return fmt.Sprintf("%.0f", r.idleChecks), nil
		}},
		durations("observer lag p50", lag, 0.5, "", nil),
		durations("observer lag p99", lag, 0.99, "<= 20 ms", func(*result) time.Duration { return 20 * time.Millisecond }),
		{"announced terms not increasing", "0", func(r *result) (string, *bool) {
			return fmt.Sprint(r.termRegressions), yes(r.termRegressions == 0)
		}},
	}
}

func header(r *result) string { return fmt.Sprintf("%s %d", r.algorithm, r.n) }

// printTable writes the results as a text table, a column per algorithm
// and size.
func printTable(out io.Writer, results []*result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\ttarget")
	for _, r := range results {
		fmt.Fprintf(tw, "\t%s", header(r))
	}
	fmt.Fprintln(tw)
	for _, rw := range tableRows(results) {
		fmt.Fprintf(tw, "%s\t%s", rw.name, rw.target)
		for _, r := range results {
			v, ok := rw.cell(r)
			switch {
			case ok == nil:
			case *ok:
				v += " ok"
			default:
				v += " MISSED"
			}
			fmt.Fprintf(tw, "\t%s", v)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, r := range results {
		if r.badExits > 0 {
			fmt.Fprintf(out, "%s: %d SIGTERMs did not end in exit status 0\n", header(r), r.badExits)
		}
		if r.err != nil {
			fmt.Fprintf(out, "%s: incomplete: %v\n", header(r), r.err)
		}
	}
	fmt.Fprintln(out, legend)
}

const legend = `Times run until every live node's /status names the new leader. Crash failover: the leader is SIGKILLed; the
others learn it from the NATS server's connection event, or, with ELECTION_CONNECTION_EVENTS=off ("heartbeats
alone"), from its silence. Hang: SIGSTOP (the connection stays open). Messages are the nodes' publications
(election_messages_sent_total), heartbeats excepted and lease renewals (Paxos, byzantine) subtracted at their idle
rate from the survivors' agreement on, beside the worst case the simulator checks (sim.MessageBound,
sim.StartBound). Signature checks: the nodes' election_signature_checks_total (with member keys), the steady
traffic's subtracted likewise. NATS server in / out / bytes: what the
server received and delivered from the failover until the cluster was quiet, heartbeats and renewals included.
Idle: over a quiet window. Announced terms not increasing: announcements on the leader subject whose term did not
exceed every earlier one, outside the restart of the whole cluster that precedes the "heartbeats alone" rounds.`

// writeMarkdown writes benchmarks.md into cfg.out: the machine, the date,
// the command and the table.
func writeMarkdown(cfg config, results []*result, raft []raftSeries, raftLoads []raftLoad, plot string, took time.Duration) (string, error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return "", err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Measured by `go tool task bench` (`cmd/bench`) on %s: %s, %d CPUs, Linux %s, %s. It took %s.\n\n",
		time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), kernel(), runtime.Version(), took.Round(time.Second))
	fmt.Fprintf(&b, "Real node processes with the default settings (ticks of %s, heartbeats every %d ticks, a leader time-out of %d, Paxos and byzantine leases of %d ticks renewed every %d, %d ticks at 101 members) on an embedded NATS server: %s; %s; processes started %s.\n\n",
		"10 ms", election.DefaultHeartbeatTicks, election.DefaultLeaderTimeoutTicks, election.DefaultLeaseTicks, election.DefaultRenewalTicks, election.DefaultLease(101), planText(cfg.algorithms, cfg.plan), roundsText(cfg.rounds), orderText(cfg.order))
	b.WriteString("| | target |")
	for _, r := range results {
		fmt.Fprintf(&b, " %s |", header(r))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(results)) + "\n")
	for _, rw := range tableRows(results) {
		fmt.Fprintf(&b, "| %s | %s |", rw.name, rw.target)
		for _, r := range results {
			v, ok := rw.cell(r)
			switch {
			case ok == nil:
			case *ok:
				v += " ✓"
			default:
				v += " ✗"
			}
			fmt.Fprintf(&b, " %s |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n" + strings.ReplaceAll(legend, "\n", " ") + "\n")
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(&b, "\n**%s incomplete:** %s\n", header(r), oneLine(r.err.Error(), 300))
		}
	}
	if t := raftTable(results, raft, true); t != "" {
		b.WriteString("\n## Beside hashicorp/raft\n\nThe same crash failover (SIGKILL of the leader until every survivor names the new one) for hashicorp/raft v1.8.0 peers on loopback (`bench/raftpeer`, in-memory stores), with its default configuration and with heartbeat, election and lease time-outs of 150 ms:\n\n")
		b.WriteString(t)
	}
	if t := raftLoadTable(raftLoads, true); t != "" {
		b.WriteString("\nThe steady state under each load beside hashicorp/raft, 5 peers with 150 ms time-outs (spurious leader changes: the leadership moved to another peer while none failed):\n\n")
		b.WriteString(t)
	}
	if plot != "" {
		fmt.Fprintf(&b, "\n![crash failover, p50, p90 and max per cluster](%s)\n", filepath.Base(plot))
	}
	path := filepath.Join(cfg.out, "benchmarks.md")
	doc, err := keepDynSection(path, b.Bytes())
	if err != nil {
		return "", err
	}
	if doc, err = keepManySection(path, doc); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, doc, 0o644)
}

// oneLine shortens s to at most n bytes on one line.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}

// orderText says in which order a cluster's processes are started.
func orderText(order string) string {
	if order == orderIDs {
		return "one at a time, lowest ID first"
	}
	return "in a random order, several at a time"
}
