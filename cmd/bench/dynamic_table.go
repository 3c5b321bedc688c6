package main

import (
	"cmp"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/baton-election/baton/cmd/internal/procstat"
	"github.com/baton-election/baton/pkg/protocol"
)

// dynColumn is one column of the table of members that come and go: a
// static cluster's result or a dynamic one's, of the same run.
type dynColumn struct {
	static *result
	dyn    *dynResult
}

func (c dynColumn) header() string {
	if c.dyn != nil {
		return fmt.Sprintf("%s %d dynamic", c.dyn.algorithm, c.dyn.n)
	}
	return header(c.static)
}

// dynColumns pairs, for each algorithm and size the run measured with
// dynamic membership, the static cluster's column (if the run measured
// it) with the dynamic one, in the order of the main table.
func dynColumns(statics []*result, dyns []*dynResult) []dynColumn {
	var out []dynColumn
	for _, d := range dyns {
		for _, s := range statics {
			if s != nil && s.algorithm == d.algorithm && s.n == d.n {
				out = append(out, dynColumn{static: s})
			}
		}
		out = append(out, dynColumn{dyn: d})
	}
	return out
}

// dynRow is a row of that table: its cell in a static column (nil: "-")
// and in a dynamic one.
type dynRow struct {
	name   string
	static func(r *result) string
	dyn    func(d *dynResult) string
}

func (rw dynRow) cell(c dynColumn) string {
	switch {
	case c.dyn != nil && rw.dyn != nil:
		return rw.dyn(c.dyn)
	case c.static != nil && rw.static != nil:
		return rw.static(c.static)
	}
	return "-"
}

// quantileCell renders the q-quantile of ds, "-" for none.
func quantileCell(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return "-"
	}
	return ms(quantile(ds, q))
}

// Each field of the samples, as durations or counts.
func joinTimes(js []joinSample, f func(j joinSample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(js))
	for i, j := range js {
		out[i] = f(j)
	}
	return out
}

func departTimes(ds []departSample, f func(d departSample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = f(d)
	}
	return out
}

// typesCell renders message counts by type: the mean total with its
// range, then each type's mean, largest first: "104 (103..106):
// presence 101, coordinator 1, election 2".
func typesCell(samples []typeCounts) string {
	if len(samples) == 0 {
		return "-"
	}
	totals := make([]int, len(samples))
	sums := map[protocol.Type]int{}
	for i, s := range samples {
		totals[i] = s.total()
		for t, v := range s {
			sums[t] += v
		}
	}
	types := make([]protocol.Type, 0, len(sums))
	for t := range sums {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b protocol.Type) int {
		return cmp.Or(cmp.Compare(sums[b], sums[a]), cmp.Compare(a, b))
	})
	var parts []string
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%s %s", t, oneDecimal(float64(sums[t])/float64(len(samples)))))
	}
	if len(parts) == 0 {
		return mean(totals)
	}
	return mean(totals) + ": " + strings.Join(parts, ", ")
}

// oneDecimal renders x with one decimal, none if it is whole: "4",
// "0.5".
func oneDecimal(x float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(x, 'f', 1, 64), ".0")
}

func joinMsgs(js []joinSample) []typeCounts {
	out := make([]typeCounts, len(js))
	for i, j := range js {
		out[i] = j.msgs
	}
	return out
}

func departMsgs(ds []departSample) []typeCounts {
	out := make([]typeCounts, len(ds))
	for i, d := range ds {
		out[i] = d.msgs
	}
	return out
}

// termsCell renders the new terms announced and the elections started
// per event of each kind, separated by " / ".
func termsCell(kinds ...[]int) string {
	var parts []string
	for _, k := range kinds {
		parts = append(parts, mean(k))
	}
	return strings.Join(parts, " / ")
}

func joinTerms(js []joinSample) (terms, started []int) {
	for _, j := range js {
		terms, started = append(terms, j.newTerms), append(started, j.started)
	}
	return terms, started
}

func departTerms(ds []departSample) (terms, started []int) {
	for _, d := range ds {
		terms, started = append(terms, d.newTerms), append(started, d.started)
	}
	return terms, started
}

func resumeTimes(rs []resumeSample) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.back
	}
	return out
}

func resumeTerms(rs []resumeSample) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.newTerms
	}
	return out
}

// quantileRows are the rows p50, p90 and max of one measurement: name
// "… p50" and so on.
func quantileRows(name string, static func(r *result) []time.Duration, dyn func(d *dynResult) []time.Duration, qs ...float64) []dynRow {
	var out []dynRow
	for _, q := range qs {
		label := "max"
		if q < 1 {
			label = fmt.Sprintf("p%.0f", q*100)
		}
		rw := dynRow{name: name + " " + label, dyn: func(d *dynResult) string { return quantileCell(dyn(d), q) }}
		if static != nil {
			rw.static = func(r *result) string { return quantileCell(static(r), q) }
		}
		out = append(out, rw)
	}
	return out
}

// dynRows are the rows of the table of members that come and go.
func dynRows() []dynRow {
	const p50, p90, pmax = 0.5, 0.9, 1
	var rs []dynRow
	add := func(r ...dynRow) { rs = append(rs, r...) }
	add(dynRow{
		name: "cold start to agreed leader (dynamic: n−1 members, until they also list each other)",
		static: func(r *result) string {
			if r.coldStart == 0 {
				return "-"
			}
			return ms(r.coldStart)
		},
		dyn: func(d *dynResult) string {
			if d.coldStart == 0 {
				return "-"
			}
			return ms(d.coldStart)
		},
	})
	top := func(f func(j joinSample) time.Duration) func(d *dynResult) []time.Duration {
		return func(d *dynResult) []time.Duration { return joinTimes(d.joinTop, f) }
	}
	low := func(f func(j joinSample) time.Duration) func(d *dynResult) []time.Duration {
		return func(d *dynResult) []time.Duration { return joinTimes(d.joinLow, f) }
	}
	seen := func(j joinSample) time.Duration { return j.seen }
	afterPresence := func(j joinSample) time.Duration { return j.seen - j.presence }
	presence := func(j joinSample) time.Duration { return j.presence }
	knows := func(j joinSample) time.Duration { return j.knows }
	leader := func(j joinSample) time.Duration { return j.leader }
	add(quantileRows("join of the highest ID: its first presence broadcast, from its start", nil, top(presence), p50, pmax)...)
	add(quantileRows("join of the highest ID: every member lists it, from its start", nil, top(seen), p50, p90, pmax)...)
	add(quantileRows("join of the highest ID: every member lists it, from its first presence broadcast", nil, top(afterPresence), p50, p90, pmax)...)
	add(quantileRows("join of the highest ID: it lists every member, from its start", nil, top(knows), p50, pmax)...)
	add(quantileRows("join of the highest ID: every member names it the leader, from its start (static: rejoin of the highest ID)",
		func(r *result) []time.Duration { return r.rejoin }, top(leader), p50, p90, pmax)...)
	add(quantileRows("join below the leader: every member lists it, from its start", nil, low(seen), p50, p90, pmax)...)
	add(quantileRows("join below the leader: every member lists it, from its first presence broadcast", nil, low(afterPresence), p50, p90, pmax)...)
	add(quantileRows("join below the leader: it lists every member, from its start", nil, low(knows), p50, pmax)...)
	add(dynRow{
		name:   "messages per join of the highest ID, by type (static: per rejoin)",
		static: func(r *result) string { return mean(r.rejoinMsgs) },
		dyn:    func(d *dynResult) string { return typesCell(joinMsgs(d.joinTop)) },
	}, dynRow{
		name: "messages per join below the leader, by type",
		dyn:  func(d *dynResult) string { return typesCell(joinMsgs(d.joinLow)) },
	}, dynRow{
		name: "new terms announced / elections started per join of the highest ID",
		dyn:  func(d *dynResult) string { t, s := joinTerms(d.joinTop); return termsCell(t, s) },
	}, dynRow{
		name: "new terms announced / elections started per join below the leader",
		dyn:  func(d *dynResult) string { t, s := joinTerms(d.joinLow); return termsCell(t, s) },
	})

	departures := []struct {
		what                 string
		leader, member       func(d *dynResult) []departSample
		static               func(r *result) []time.Duration
		staticName           string
		staticMsgs           func(r *result) []int
		leaderQs, removedQs  []float64
		memberRemovedQs      []float64
		staticMessageRowName string
	}{
		{"crash (SIGKILL)", func(d *dynResult) []departSample { return d.leaderCrash }, func(d *dynResult) []departSample { return d.memberCrash },
			func(r *result) []time.Duration { return r.crash }, "crash failover", func(r *result) []int { return r.crashMsgs },
			[]float64{p50, p90, pmax}, []float64{p50}, []float64{p50, p90, pmax}, "per crash failover"},
		{"SIGTERM", func(d *dynResult) []departSample { return d.leaderTerm }, func(d *dynResult) []departSample { return d.memberTerm },
			func(r *result) []time.Duration { return r.handoff }, "SIGTERM hand-over", func(r *result) []int { return r.handoffMsgs },
			[]float64{p50, p90, pmax}, []float64{p50}, []float64{p50, p90, pmax}, "per hand-over"},
		{"hang (SIGSTOP)", func(d *dynResult) []departSample { return d.leaderHang }, func(d *dynResult) []departSample { return d.memberHang },
			func(r *result) []time.Duration { return r.hang }, "hang failover", func(r *result) []int { return r.hangMsgs },
			[]float64{p50, p90, pmax}, []float64{p50, pmax}, []float64{p50, p90, pmax}, "per hang failover"},
	}
	removed := func(d departSample) time.Duration { return d.removed }
	for _, dp := range departures {
		add(quantileRows("leader "+dp.what+": every survivor names the new leader (static: "+dp.staticName+")", dp.static,
			func(d *dynResult) []time.Duration {
				return departTimes(dp.leader(d), func(s departSample) time.Duration { return s.leader })
			}, dp.leaderQs...)...)
		add(quantileRows("leader "+dp.what+": no survivor lists it", nil,
			func(d *dynResult) []time.Duration { return departTimes(dp.leader(d), removed) }, dp.removedQs...)...)
	}
	add(quantileRows("resumed leader (SIGCONT) takes over and is listed by every other member", func(r *result) []time.Duration { return r.unhang },
		func(d *dynResult) []time.Duration { return resumeTimes(d.resumedLeader) }, p50, pmax)...)
	for _, dp := range departures {
		add(quantileRows("member below the leader, "+dp.what+": no survivor lists it", nil,
			func(d *dynResult) []time.Duration { return departTimes(dp.member(d), removed) }, dp.memberRemovedQs...)...)
	}
	add(quantileRows("resumed member below the leader (SIGCONT) listed by every other member", nil,
		func(d *dynResult) []time.Duration { return resumeTimes(d.resumedMember) }, p50, pmax)...)
	for _, dp := range departures {
		add(dynRow{
			name:   "messages per leader " + dp.what + ", by type (static: " + dp.staticMessageRowName + ")",
			static: func(r *result) string { return mean(dp.staticMsgs(r)) },
			dyn:    func(d *dynResult) string { return typesCell(departMsgs(dp.leader(d))) },
		})
	}
	for _, dp := range departures {
		add(dynRow{
			name: "messages per member below the leader, " + dp.what + ", by type",
			dyn:  func(d *dynResult) string { return typesCell(departMsgs(dp.member(d))) },
		})
	}
	add(dynRow{
		name: "new terms announced / elections started per leader crash, SIGTERM, hang",
		dyn: func(d *dynResult) string {
			var parts []string
			for _, s := range [][]departSample{d.leaderCrash, d.leaderTerm, d.leaderHang} {
				t, e := departTerms(s)
				parts = append(parts, termsCell(t, e))
			}
			return strings.Join(parts, "; ")
		},
	}, dynRow{
		name: "new terms announced / elections started per member below the leader's crash, SIGTERM, hang; new terms per its resumption",
		dyn: func(d *dynResult) string {
			var parts []string
			for _, s := range [][]departSample{d.memberCrash, d.memberTerm, d.memberHang} {
				t, e := departTerms(s)
				parts = append(parts, termsCell(t, e))
			}
			return strings.Join(parts, "; ") + "; " + mean(resumeTerms(d.resumedMember))
		},
	}, dynRow{
		name: "idle CPU per node, mean (max)",
		static: func(r *result) string {
			if len(r.idleCPU) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f%% (%.2f%%)", meanFloat(r.idleCPU), slices.Max(r.idleCPU))
		},
		dyn: func(d *dynResult) string {
			if len(d.idleCPU) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f%% (%.2f%%)", meanFloat(d.idleCPU), slices.Max(d.idleCPU))
		},
	}, dynRow{
		name: "presence broadcasts per second at idle, cluster",
		dyn: func(d *dynResult) string {
			if len(d.idleCPU) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", d.presences)
		},
	}, dynRow{
		name:   "announced terms not increasing",
		static: func(r *result) string { return fmt.Sprint(r.termRegressions) },
		dyn:    func(d *dynResult) string { return fmt.Sprint(d.termRegressions) },
	})
	return rs
}

// dynLegend explains the table of members that come and go.
const dynLegend = `Dynamic clusters (ELECTION_MEMBERSHIP=dynamic, default settings: presence every 1 s, a member silent for 4 presence
intervals leaves) of IDs 1..n; Paxos with ELECTION_VOTERS the 3 lowest IDs (5 from 25 members). Members 1..n-1 run
first; each round then takes member n (the highest ID, the leader) and a member below it (the lowest ID that does not
vote: 1, for Paxos 4, or 6 from 25 members) out and back: SIGKILL and a new start, SIGTERM and a new start, SIGSTOP and
SIGCONT; the joins are every start of n (the first one included) and of the member below, each with an empty data
directory. "Lists": the "members" of GET /status, polled (every 1 ms at first, then a 25th of
the time elapsed, up to 20 ms; ten times that at 101 members); "names the leader": as the static rows, followed with long
polls. Presence broadcasts as the benchmark received them. Messages: the nodes' publications by type
(election_messages_sent_total, point-to-point presence answers included) from the event until the cluster is quiet
(-quiet), heartbeats excepted, the periodic presence broadcasts the benchmark received excepted, other steady traffic
(Paxos renewals and acceptances) subtracted at its idle rate. New terms: announced terms above every earlier one;
elections started: election_elections_started_total summed over the nodes. The static columns are the same run's
static clusters of the same size.`

// printDynTable writes the table of members that come and go.
func printDynTable(out io.Writer, statics []*result, dyns []*dynResult) {
	cols := dynColumns(statics, dyns)
	if len(cols) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "members that come and go")
	for _, c := range cols {
		fmt.Fprintf(tw, "\t%s", c.header())
	}
	fmt.Fprintln(tw)
	for _, rw := range dynRows() {
		fmt.Fprint(tw, rw.name)
		for _, c := range cols {
			fmt.Fprintf(tw, "\t%s", rw.cell(c))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, d := range dyns {
		if d.err != nil {
			fmt.Fprintf(out, "%s %d dynamic: incomplete: %v\n", d.algorithm, d.n, d.err)
		}
	}
	fmt.Fprintln(out, dynLegend)
}

// dynMarkdownTable renders the table in Markdown.
func dynMarkdownTable(statics []*result, dyns []*dynResult) string {
	cols := dynColumns(statics, dyns)
	if len(cols) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c.header())
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, rw := range dynRows() {
		fmt.Fprintf(&b, "| %s |", rw.name)
		for _, c := range cols {
			fmt.Fprintf(&b, " %s |", rw.cell(c))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n" + strings.ReplaceAll(dynLegend, "\n", " ") + "\n")
	for _, d := range dyns {
		if d.err != nil {
			fmt.Fprintf(&b, "\n**%s %d dynamic incomplete:** %s\n", d.algorithm, d.n, oneLine(d.err.Error(), 300))
		}
	}
	return b.String()
}

// The section of benchmarks.md that -membership dynamic writes, and that
// a run of the static benchmark alone keeps as it is.
const (
	dynSectionHeading = "## Members that come and go"
	dynSectionIntro   = "Measured by `cmd/bench -membership static,dynamic`: clusters with dynamic membership (`ELECTION_MEMBERSHIP=dynamic`), beside the static clusters of the same run. Each block below is one run; a new run at the same sizes replaces its block, and a run of the static benchmark alone leaves this section as it is."
)

// nodeCommit says from which commit the node binary was built, as its
// build information records it.
func nodeCommit(binary string) string {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "unknown commit"
	}
	rev, modified := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown commit"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		return "commit " + rev + " with uncommitted changes"
	}
	return "commit " + rev
}

// dynBlockTitle is the heading of a run's block: its dynamic sizes.
func dynBlockTitle(dyns []*dynResult) string {
	var sizes []int
	for _, d := range dyns {
		if !slices.Contains(sizes, d.n) {
			sizes = append(sizes, d.n)
		}
	}
	slices.Sort(sizes)
	return "### At " + andList(sizeStrings(sizes)) + " members"
}

// dynBlock is one run's block of the section; others is the CPU time
// that processes other than the benchmark's used meanwhile (-1: not
// known).
func dynBlock(cfg config, statics []*result, dyns []*dynResult, took, others time.Duration) string {
	var b strings.Builder
	b.WriteString(dynBlockTitle(dyns) + "\n\n")
	fmt.Fprintf(&b, "`%s`, on %s, node binary of %s: %s, %d CPUs, Linux %s, %s; %s. It took %s",
		cfg.command, time.Now().UTC().Format("2006-01-02"), nodeCommit(cfg.binary), cpuModel(), runtime.NumCPU(), kernel(), runtime.Version(),
		roundsText(cfg.rounds), took.Round(time.Second))
	if others >= 0 && took > 0 {
		fmt.Fprintf(&b, "; processes other than the benchmark's used %s of CPU meanwhile, %.0f%% of the machine", others.Round(time.Second),
			100*others.Seconds()/took.Seconds()/float64(runtime.NumCPU()))
	}
	b.WriteString(".\n\n")
	b.WriteString(dynMarkdownTable(statics, dyns))
	return b.String()
}

// cpuBusy is the CPU time the machine has spent busy (/proc/stat: user,
// nice, system, irq, softirq and steal), from the first line of stat.
func cpuBusy(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var ticks int64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q", f)
		}
		if i != 3 && i != 4 { // idle, iowait
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / procstat.UserHZ, nil
}

// cpuUse is what the machine and this process with its children (those
// waited for) have used so far.
type cpuUse struct {
	machine, own time.Duration
	ok           bool
}

func readCPUUse() cpuUse {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuUse{}
	}
	busy, err := cpuBusy(string(data))
	if err != nil {
		return cpuUse{}
	}
	return cpuUse{machine: busy, own: ownCPU(), ok: true}
}

// othersSince is the CPU time processes other than this one and its
// children used since u, less extra (children not yet waited for); -1
// if not known.
func (u cpuUse) othersSince(extra time.Duration) time.Duration {
	now := readCPUUse()
	if !u.ok || !now.ok {
		return -1
	}
	return max(0, now.machine-u.machine-(now.own-u.own)-extra)
}

// section finds the section that starts with heading in doc: its start
// and end (the next heading of its level or above, or the end of doc);
// ok false without one.
func section(doc, heading string) (start, end int, ok bool) {
	level := strings.Count(strings.Fields(heading)[0], "#")
	pos := 0
	start = -1
	for line := range strings.SplitAfterSeq(doc, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if start < 0 && trimmed == heading {
			start = pos
		} else if start >= 0 && strings.HasPrefix(trimmed, "#") {
			if l := len(trimmed) - len(strings.TrimLeft(trimmed, "#")); l <= level && strings.HasPrefix(trimmed[l:], " ") {
				return start, pos, true
			}
		}
		pos += len(line)
	}
	if start < 0 {
		return 0, 0, false
	}
	return start, len(doc), true
}

// insertSection puts sec (a section, with its heading) into doc in place
// of the section of the same heading, or, without one, before the first
// heading of level 2 that follows doc's title, or at its end.
func insertSection(doc, heading, sec string) string {
	sec = strings.TrimRight(sec, "\n") + "\n"
	if start, end, ok := section(doc, heading); ok {
		rest := doc[end:]
		if rest != "" {
			sec += "\n"
		}
		return doc[:start] + sec + rest
	}
	if i := strings.Index(doc, "\n## "); i >= 0 {
		return doc[:i+1] + sec + "\n" + doc[i+1:]
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + sec
}

// spliceDynBlock puts block into the section of members that come and
// go of doc: in place of the block of the same title, or after the
// others; the section is made if doc has none.
func spliceDynBlock(doc, block string) string {
	title, _, _ := strings.Cut(block, "\n")
	sec := dynSectionHeading + "\n\n" + dynSectionIntro + "\n"
	if start, end, ok := section(doc, dynSectionHeading); ok {
		sec = doc[start:end]
	}
	sec = strings.TrimRight(sec, "\n") + "\n"
	if start, end, ok := section(sec, title); ok {
		rest := sec[end:]
		b := strings.TrimRight(block, "\n") + "\n"
		if rest != "" {
			b += "\n"
		}
		sec = sec[:start] + b + rest
	} else {
		sec += "\n" + strings.TrimRight(block, "\n") + "\n"
	}
	return insertSection(doc, dynSectionHeading, sec)
}

// keepDynSection carries the section of members that come and go of the
// benchmarks.md at path, if any, into doc, its new content.
func keepDynSection(path string, doc []byte) ([]byte, error) {
	return keepSection(path, doc, dynSectionHeading)
}

// keepSection carries the section under heading of the benchmarks.md at
// path, if any, into doc, its new content.
func keepSection(path string, doc []byte, heading string) ([]byte, error) {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, err
	}
	start, end, ok := section(string(old), heading)
	if !ok {
		return doc, nil
	}
	return []byte(insertSection(string(doc), heading, string(old[start:end]))), nil
}

// writeDynMarkdown writes this run's block into the section of members
// that come and go of benchmarks.md in cfg.out, leaving the rest of the
// file as it is.
func writeDynMarkdown(cfg config, statics []*result, dyns []*dynResult, took, others time.Duration) (string, error) {
	return rewriteBenchmarks(cfg, func(doc string) string {
		return spliceDynBlock(doc, dynBlock(cfg, statics, dyns, took, others))
	})
}

// ownCPU is the CPU time of this process and of its children that were
// waited for.
func ownCPU() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}
