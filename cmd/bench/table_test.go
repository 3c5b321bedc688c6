package main

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 10 * time.Millisecond},
		{0.9, 18 * time.Millisecond},
		{1, 20 * time.Millisecond},
		{0, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := quantile(ds, tt.q); got != tt.want {
			t.Errorf("quantile(1..20 ms, %v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := quantile(nil, 0.9); got != 0 {
		t.Errorf("quantile(nil) = %v, want 0", got)
	}
	if ds[0] != 20*time.Millisecond {
		t.Errorf("quantile reordered its input: ds[0] = %v, want 20ms", ds[0])
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-rounds", "3", "-steady", "5s", "-algorithms", "ring, bully", "-sizes", "5, 25"})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if cfg.rounds[5] != 3 || cfg.rounds[25] != 3 || cfg.steady != 5*time.Second || len(cfg.algorithms) != 2 || cfg.algorithms[0] != "ring" || cfg.algorithms[1] != "bully" {
		t.Errorf("parseFlags = %+v, want 3 rounds, 5s steady, [ring bully]", cfg)
	}
	cfg, err = parseFlags(nil)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	wantPlan := map[protocol.Algorithm][]int{
		protocol.Bully: {5, 25, 101}, protocol.Ring: {5, 25, 101}, protocol.Paxos: {5, 25, 101},
		protocol.Byzantine: {4, 7, 25},
	}
	if !reflect.DeepEqual(cfg.plan, wantPlan) || !slices.Equal(cfg.algorithms, protocol.Algorithms) || cfg.steady != 0 {
		t.Errorf("defaults: plan %v, algorithms %v, steady %v; want %v, every algorithm, no steady state", cfg.plan, cfg.algorithms, cfg.steady, wantPlan)
	}
	wantRounds := map[int]int{4: 5, 5: 5, 7: 5, 25: 3, 101: 2}
	if !reflect.DeepEqual(cfg.rounds, wantRounds) || !slices.Equal(cfg.sizes, []int{4, 5, 7, 25, 101}) {
		t.Errorf("defaults: sizes %v, rounds %v; want [4 5 7 25 101], %v", cfg.sizes, cfg.rounds, wantRounds)
	}
	cfg, err = parseFlags([]string{"-full"})
	if err != nil || cfg.rounds[5] != 20 || cfg.rounds[4] != 20 || cfg.rounds[7] != 20 || cfg.rounds[25] != 10 || cfg.steady != 10*time.Minute {
		t.Errorf("-full: %+v, %v; want 20 rounds at 4, 5 and 7, 10 at 25, and 10 minutes of steady state", cfg, err)
	}
	if cfg.roundsAt(25) != 10 || cfg.roundsAt(50) != 10 {
		t.Errorf("-full: raft's rounds at 25 and 50: %d and %d, want 10", cfg.roundsAt(25), cfg.roundsAt(50))
	}
	// The smoke test's flags: every algorithm at 5 nodes, byzantine too.
	cfg, err = parseFlags([]string{"-sizes", "5", "-rounds", "1"})
	if err != nil || cfg.plan[protocol.Byzantine][0] != 5 || len(cfg.plan) != 4 || cfg.rounds[5] != 1 {
		t.Errorf("-sizes 5 -rounds 1: %+v, %v; want every algorithm at 5, one round", cfg, err)
	}
	// The default sizes name byzantine; measuring without it is no error.
	if _, err := parseFlags([]string{"-algorithms", "bully"}); err != nil {
		t.Errorf("-algorithms bully: %v", err)
	}
	for _, bad := range [][]string{
		{"-rounds", "-1"}, {"-sizes", "1"}, {"-sizes", "x"}, {"-algorithms", ","}, {"-algorithms", "raft"}, {"extra"},
		{"-algorithms", "ring,ring"}, {"-sizes", "byzantine=4", "-algorithms", "bully"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) = nil error, want an error", bad)
		}
	}
}

func TestParseSizes(t *testing.T) {
	all := protocol.Algorithms
	tests := []struct {
		spec     string
		explicit bool
		want     map[protocol.Algorithm][]int
	}{
		{"5", true, map[protocol.Algorithm][]int{"bully": {5}, "ring": {5}, "paxos": {5}, "byzantine": {5}}},
		{"101, 5,25", true, map[protocol.Algorithm][]int{"bully": {5, 25, 101}, "ring": {5, 25, 101}, "paxos": {5, 25, 101}, "byzantine": {5, 25, 101}}},
		{defaultSizes, false, map[protocol.Algorithm][]int{"bully": {5, 25, 101}, "ring": {5, 25, 101}, "paxos": {5, 25, 101}, "byzantine": {4, 7, 25}}},
		{" byzantine = 7,4 ; 5 ; paxos=3 ;", true, map[protocol.Algorithm][]int{"bully": {5}, "ring": {5}, "paxos": {3}, "byzantine": {4, 7}}},
		{"bully=5;ring=6;paxos=7;byzantine=4", true, map[protocol.Algorithm][]int{"bully": {5}, "ring": {6}, "paxos": {7}, "byzantine": {4}}},
	}
	for _, tt := range tests {
		got, err := parseSizes(tt.spec, all, tt.explicit)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", tt.spec, got, err, tt.want)
		}
	}
	// Lists of algorithms not measured: an error if written, not in the
	// default.
	got, err := parseSizes(defaultSizes, []protocol.Algorithm{protocol.Ring}, false)
	if err != nil || !reflect.DeepEqual(got, map[protocol.Algorithm][]int{"ring": {5, 25, 101}}) {
		t.Errorf("the default for ring alone: %v, %v", got, err)
	}
	errs := []struct{ spec, says string }{
		{"", "names no size"},
		{" ; ", "names no size"},
		{"5,x", `"x" in "5,x" is not a cluster size`},
		{"1", "from 2 to 1000"},
		{"1001", "from 2 to 1000"},
		{"5,5", "5 twice"},
		{"5;7", "two lists without an algorithm"},
		{"raft=5;5", `"raft" in "raft=5" is not one of`},
		{"byzantine=4;byzantine=7;5", "two lists for byzantine"},
		{"byzantine=", `"byzantine=" names no size`},
		{"byzantine=4", "no sizes for bully"},
		{"3,5", "byzantine at 3 nodes tolerates no liar"},
		{"5;byzantine=2,4", "byzantine at 2 nodes tolerates no liar"},
	}
	for _, e := range errs {
		_, err := parseSizes(e.spec, all, true)
		if err == nil || !strings.Contains(err.Error(), e.says) {
			t.Errorf("parseSizes(%q) = %v, want an error saying %q", e.spec, err, e.says)
		}
	}
	if _, err := parseSizes("5;byzantine=4", []protocol.Algorithm{protocol.Bully}, true); err == nil || !strings.Contains(err.Error(), "does not measure") {
		t.Errorf("a list for byzantine, not measured: %v, want an error", err)
	}
}

func TestRoundsAt(t *testing.T) {
	for n, want := range map[int]int{2: 5, 4: 5, 5: 5, 7: 5, 24: 5, 25: 3, 100: 3, 101: 2, 500: 2} {
		if got := roundsAt(quickRounds, n); got != want {
			t.Errorf("roundsAt(quick, %d) = %d, want %d", n, got, want)
		}
	}
}

func TestColumnsAndTexts(t *testing.T) {
	plan, err := parseSizes(defaultSizes, protocol.Algorithms, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range columns(protocol.Algorithms, plan) {
		got = append(got, fmt.Sprintf("%s %d", c.algorithm, c.n))
	}
	want := []string{"byzantine 4", "bully 5", "ring 5", "paxos 5", "byzantine 7", "bully 25", "ring 25", "paxos 25", "byzantine 25", "bully 101", "ring 101", "paxos 101"}
	if !slices.Equal(got, want) {
		t.Errorf("columns = %q, want %q", got, want)
	}
	if got, want := planText(protocol.Algorithms, plan), "bully, ring and paxos at 5, 25 and 101 nodes; byzantine at 4, 7 and 25 nodes"; got != want {
		t.Errorf("planText = %q, want %q", got, want)
	}
	if got, want := roundsText(map[int]int{4: 5, 5: 5, 7: 5, 25: 3, 101: 2}), "5 rounds at 4, 5 and 7 nodes, 3 at 25, 2 at 101"; got != want {
		t.Errorf("roundsText = %q, want %q", got, want)
	}
	if got, want := roundsText(map[int]int{5: 1}), "1 round at 5 nodes"; got != want {
		t.Errorf("roundsText = %q, want %q", got, want)
	}
}

// cell returns the cell of the row named name for r.
func cell(t *testing.T, name string, r *result) string {
	t.Helper()
	for _, rw := range rows() {
		if rw.name == name {
			v, _ := rw.cell(r)
			return v
		}
	}
	t.Fatalf("no row %q", name)
	return ""
}

// Byzantine clusters show their signature checks and the byzantine
// algorithm's own message bound; the others show no checks.
func TestByzantineRows(t *testing.T) {
	bz := &result{algorithm: protocol.Byzantine, n: 4, crashChecks: []int{30, 50}, crashMsgs: []int{12}}
	if got := cell(t, "signature checks per crash failover", bz); got != "40 (30..50)" {
		t.Errorf("byzantine checks: %q, want 40 (30..50)", got)
	}
	want := fmt.Sprintf("12 (12..12) / %d", sim.MessageBound(sim.Spec{Name: "byzantine"}, 4))
	if got := cell(t, "messages per crash failover / bound", bz); got != want {
		t.Errorf("byzantine messages: %q, want %q", got, want)
	}
	if sim.MessageBound(sim.Spec{Name: "byzantine"}, 4) == sim.MessageBound(sim.Spec{Name: "bully"}, 4) {
		t.Error("the byzantine bound is Bully's")
	}
	bully := &result{algorithm: protocol.Bully, n: 4, crashChecks: []int{0}}
	if got := cell(t, "signature checks per crash failover", bully); got != "-" {
		t.Errorf("bully checks: %q, want -", got)
	}
}

// millis returns durations of n milliseconds.
func millis(n ...int) []time.Duration {
	ds := make([]time.Duration, len(n))
	for i, x := range n {
		ds[i] = time.Duration(x) * time.Millisecond
	}
	return ds
}

// The byzantine columns carry every failover, their messages and
// signature checks, idle CPU and memory; the crash failover p90 is
// checked against 300 ms at 4 and 7 nodes only, and the targets of the
// crash-tolerant algorithms do not apply to it.
func TestByzantineColumns(t *testing.T) {
	bz := func(n int, crash int) *result {
		return &result{
			algorithm: protocol.Byzantine, n: n, crash: millis(crash), hang: millis(900), handoff: millis(60), termExit: millis(300),
			crashMsgs: []int{40}, hangMsgs: []int{50}, handoffMsgs: []int{45}, crashChecks: []int{100}, hangChecks: []int{120}, handoffChecks: []int{110},
			idleCPU: []float64{2, 3}, rss: []int64{14 << 20}, idleChecks: 400,
		}
	}
	bully := &result{algorithm: protocol.Bully, n: 5, crash: millis(30), hang: millis(200), handoff: millis(5), idleCPU: []float64{0.6}, rss: []int64{14 << 20}}
	results := []*result{bz(4, 250), bully, bz(7, 350), bz(25, 400)}
	var out bytes.Buffer
	printTable(&out, results)
	lines := strings.Split(out.String(), "\n")
	if h := strings.Fields(lines[0]); !slices.Equal(h, []string{"target", "byzantine", "4", "bully", "5", "byzantine", "7", "byzantine", "25"}) {
		t.Errorf("header %q, want the columns in the order of the results", lines[0])
	}
	row := func(name string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, name+"  ") {
				return l
			}
		}
		t.Fatalf("no row %q in\n%s", name, out.String())
		return ""
	}
	crash := row("crash failover p90")
	for _, want := range []string{"byzantine: <= 300 ms at 4 and 7", "250.0 ms ok", "30.0 ms MISSED", "350.0 ms MISSED"} {
		if !strings.Contains(crash, want) {
			t.Errorf("crash failover p90 row %q lacks %q", crash, want)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(crash), "400.0 ms") {
		t.Errorf("crash failover p90 row %q: byzantine 25 checked, want no target", crash)
	}
	for _, name := range []string{"hang failover p90", "SIGTERM hand-over p90", "idle CPU per node, mean (max)"} {
		r := row(name)
		if strings.Count(r, " ok")+strings.Count(r, "MISSED") != 1 {
			t.Errorf("%s row %q: want bully 5 checked, byzantine not", name, r)
		}
	}
	for name, want := range map[string]string{
		"hang failover p90":                            "900.0 ms",
		"SIGTERM hand-over p90":                        "60.0 ms",
		"messages per crash failover / bound":          fmt.Sprintf("40 (40..40) / %d ok", sim.MessageBound(sim.Spec{Name: "byzantine"}, 25)),
		"messages per hang failover / bound":           "50 (50..50) /",
		"messages per hand-over / bound":               "45 (45..45) /",
		"signature checks per crash failover":          "100 (100..100)",
		"signature checks per hang failover":           "120 (120..120)",
		"signature checks per hand-over":               "110 (110..110)",
		"idle CPU per node, mean (max)":                "2.50% (3.00%)",
		"resident memory per node, mean (max)":         "14.0 (14.0) MiB",
		"signature checks per second at idle, cluster": "400",
	} {
		if r := row(name); !strings.Contains(r, want) {
			t.Errorf("%s row %q lacks %q", name, r, want)
		}
	}
}
