package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// The targets of the project.
const (
	targetFailoverP90 = 300 * time.Millisecond
	targetHandoffP90  = 50 * time.Millisecond
	targetTermExit    = 2 * time.Second
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
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return fmt.Sprintf("%.1f (%d..%d)", float64(sum)/float64(len(xs)), slices.Min(xs), slices.Max(xs))
}

func check(ok bool) string {
	if ok {
		return " ok"
	}
	return " MISSED"
}

type row struct {
	name   string
	target string
	cell   func(r *result) string
}

func durationRow(name, target string, ds func(r *result) []time.Duration, q float64, limit time.Duration) row {
	return row{name, target, func(r *result) string {
		d := ds(r)
		if len(d) == 0 {
			return "-"
		}
		v := quantile(d, q)
		if limit > 0 {
			return ms(v) + check(v <= limit)
		}
		return ms(v)
	}}
}

func printTable(out io.Writer, cfg config, results []*result) {
	crash := func(r *result) []time.Duration { return r.crash }
	rejoin := func(r *result) []time.Duration { return r.rejoin }
	handoff := func(r *result) []time.Duration { return r.handoff }
	termExit := func(r *result) []time.Duration { return r.termExit }
	steady := fmt.Sprintf("steady %s, cores busy: ", cfg.steady)
	rows := []row{
		{"cold start to agreed leader", "", func(r *result) string {
			if r.coldStart == 0 {
				return "-"
			}
			return ms(r.coldStart)
		}},
		durationRow("crash failover p50", "", crash, 0.5, 0),
		durationRow("crash failover p90", "<= 300 ms", crash, 0.9, targetFailoverP90),
		durationRow("crash failover max", "", crash, 1, 0),
		durationRow("SIGTERM handoff p50", "", handoff, 0.5, 0),
		durationRow("SIGTERM handoff p90", "<= 50 ms", handoff, 0.9, targetHandoffP90),
		durationRow("SIGTERM handoff max", "", handoff, 1, 0),
		durationRow("SIGTERM to exit max", "<= 2 s, status 0", termExit, 1, targetTermExit),
		durationRow("rejoin of highest ID p50", "", rejoin, 0.5, 0),
		durationRow("rejoin of highest ID max", "", rejoin, 1, 0),
		{"messages per crash failover", "", func(r *result) string { return mean(r.crashMsgs) }},
		{"elections started per crash failover", "", func(r *result) string {
			if !r.electionsObserved {
				return "n/a"
			}
			return mean(r.crashElects)
		}},
		{"messages per SIGTERM handoff", "", func(r *result) string { return mean(r.handoffMsgs) }},
		{"messages per rejoin", "", func(r *result) string { return mean(r.rejoinMsgs) }},
		{steady + "elections started", "0", func(r *result) string {
			if !r.steadyRan {
				return "-"
			}
			if !r.electionsObserved {
				return "n/a"
			}
			return fmt.Sprint(r.steadyElections) + check(r.steadyElections == 0)
		}},
		{steady + "leader changes", "0", func(r *result) string {
			if !r.steadyRan {
				return "-"
			}
			return fmt.Sprintf("%d (%d announced)", r.steadyChanges, r.steadyAnnounced) + check(r.steadyChanges == 0 && r.steadyAnnounced == 0)
		}},
		{steady + "election messages", "", func(r *result) string {
			if !r.steadyRan {
				return "-"
			}
			return fmt.Sprint(r.steadyMessages)
		}},
		{"announced terms not increasing", "0", func(r *result) string {
			return fmt.Sprint(r.termRegressions) + check(r.termRegressions == 0)
		}},
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%d nodes, %d rounds\ttarget", cfg.nodes, cfg.rounds)
	for _, r := range results {
		fmt.Fprintf(tw, "\t%s", r.algorithm)
	}
	fmt.Fprintln(tw)
	for _, rw := range rows {
		fmt.Fprintf(tw, "%s\t%s", rw.name, rw.target)
		for _, r := range results {
			fmt.Fprintf(tw, "\t%s", rw.cell(r))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, r := range results {
		if r.badExits > 0 {
			fmt.Fprintf(out, "%s: %d SIGTERMs did not end in exit status 0\n", r.algorithm, r.badExits)
		}
	}
	fmt.Fprintf(out, "Agreement: every live node's /status names the highest live ID, polled every %s.\n", cfg.poll)
}
