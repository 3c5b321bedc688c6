package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestParseMembership(t *testing.T) {
	for _, tt := range []struct {
		in              string
		static, dynamic bool
	}{
		{"static", true, false},
		{"dynamic", false, true},
		{"static,dynamic", true, true},
		{" dynamic , static ", true, true},
	} {
		s, d, err := parseMembership(tt.in)
		if err != nil || s != tt.static || d != tt.dynamic {
			t.Errorf("parseMembership(%q) = %t, %t, %v; want %t, %t", tt.in, s, d, err, tt.static, tt.dynamic)
		}
	}
	for _, bad := range []string{"", ",", "both", "static,static", "dynamic,dynamic"} {
		if _, _, err := parseMembership(bad); err == nil {
			t.Errorf("parseMembership(%q): no error", bad)
		}
	}
}

func TestParseFlagsMembership(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil || !cfg.static || cfg.dynamic {
		t.Errorf("default: static %t, dynamic %t, %v; want the static benchmark alone", cfg.static, cfg.dynamic, err)
	}
	cfg, err = parseFlags([]string{"-membership", "static,dynamic", "-sizes", "5", "-rounds", "10"})
	if err != nil || !cfg.static || !cfg.dynamic || cfg.command != "bench -membership static,dynamic -sizes 5 -rounds 10" {
		t.Errorf("-membership static,dynamic: %+v, %v", cfg, err)
	}
	// -full with dynamic membership: more rounds, no steady state.
	cfg, err = parseFlags([]string{"-membership", "dynamic", "-full", "-algorithms", "bully"})
	if err != nil || cfg.steady != 0 || cfg.rounds[5] != 20 {
		t.Errorf("-membership dynamic -full: steady %v, rounds %v, %v; want no steady state, 20 rounds at 5", cfg.steady, cfg.rounds, err)
	}
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"-membership", "dynamic", "-algorithms", "byzantine", "-sizes", "4"}, "byzantine, whose member set changes by certified decisions, is not measured"},
		{[]string{"-membership", "dynamic", "-algorithms", "bully", "-sizes", "2"}, "at least 3"},
		{[]string{"-membership", "dynamic", "-algorithms", "paxos", "-sizes", "4"}, "at least 5"},
		{[]string{"-membership", "dynamic", "-steady", "1m"}, "-steady is for the static benchmark alone"},
		{[]string{"-membership", "neither"}, "is not static or dynamic"},
	} {
		if _, err := parseFlags(bad.args); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("parseFlags(%q) = %v, want an error saying %q", bad.args, err, bad.says)
		}
	}
	// Byzantine beside the others: measured static only.
	cfg, err = parseFlags([]string{"-membership", "static,dynamic", "-sizes", "5"})
	if err != nil || !slices.Equal(dynamicAlgorithms(cfg.algorithms), protocol.CrashAlgorithms) {
		t.Errorf("every algorithm: dynamic %v, %v; want %v", dynamicAlgorithms(cfg.algorithms), err, protocol.CrashAlgorithms)
	}
}

func TestVotersAndLowMember(t *testing.T) {
	if got := paxosVoters(5); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("voters at 5: %v", got)
	}
	if got := paxosVoters(101); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("voters at 101: %v", got)
	}
	for _, tt := range []struct {
		a    protocol.Algorithm
		n    int
		want uint64
	}{{protocol.Bully, 5, 1}, {protocol.Ring, 101, 1}, {protocol.Paxos, 5, 4}, {protocol.Paxos, 101, 6}} {
		if got := lowMember(tt.a, tt.n); got != tt.want {
			t.Errorf("lowMember(%s, %d) = %d, want %d", tt.a, tt.n, got, tt.want)
		}
	}
}

func TestSentByType(t *testing.T) {
	m := localcluster.ParseMetrics(`election_messages_sent_total{type="presence"} 7
election_messages_sent_total{type="heartbeat"} 40
election_messages_sent_total{cluster="x",type="election"} 2
election_messages_received_total{type="presence"} 99
election_elections_started_total 3
`)
	want := map[protocol.Type]float64{protocol.TypePresence: 7, protocol.TypeHeartbeat: 40, protocol.TypeElection: 2}
	if got := sentByType(m); !reflect.DeepEqual(got, want) {
		t.Errorf("sentByType = %v, want %v", got, want)
	}
}

// The counts of an event: each node's publications between its two
// readings, heartbeats aside; the periodic presence broadcasts the
// benchmark saw in each node's window aside, but the joiner's first;
// renewals less their idle rate; a node that started meanwhile from zero.
func TestCountDelta(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	counts := func(ms int, elections float64, kv ...any) nodeCounts {
		c := nodeCounts{at: at(ms), sent: map[protocol.Type]float64{}, elections: elections}
		for i := 0; i < len(kv); i += 2 {
			c.sent[kv[i].(protocol.Type)] = kv[i+1].(float64)
		}
		return c
	}
	before := map[uint64]nodeCounts{
		1: counts(0, 2, protocol.TypePresence, 10.0, protocol.TypeHeartbeat, 5.0, protocol.TypePropose, 100.0),
		2: counts(1, 1, protocol.TypePresence, 20.0),
		3: counts(2, 0, protocol.TypePresence, 30.0), // leaves meanwhile
	}
	after := map[uint64]nodeCounts{
		// An answer, one periodic broadcast; heartbeats; 30 renewals.
		1: counts(1000, 2, protocol.TypePresence, 12.0, protocol.TypeHeartbeat, 15.0, protocol.TypePropose, 130.0),
		// A periodic broadcast before its first reading (not counted
		// anyway), one inside.
		2: counts(1001, 1, protocol.TypePresence, 21.0),
		// The joiner: its first broadcast, one answer, one periodic
		// broadcast; an election.
		4: counts(1002, 1, protocol.TypePresence, 3.0, protocol.TypeElection, 1.0),
	}
	first := presenceSeen{from: 4, at: at(10)}
	seen := []presenceSeen{
		{from: 2, at: at(0)}, // before node 2's reading
		first,
		{from: 1, at: at(400)},
		{from: 2, at: at(500)},
		{from: 4, at: at(900)},
		{from: 3, at: at(600)},  // gone: not in after
		{from: 1, at: at(1500)}, // after node 1's reading
	}
	steady := map[protocol.Type]float64{protocol.TypePropose: 20} // per second
	got, elections := countDelta(before, after, seen, &first, steady, time.Second)
	// presence: (2-1) + (1-1) + (3-1) = 3; propose 30 - 20 = 10.
	want := typeCounts{protocol.TypePresence: 3, protocol.TypePropose: 10, protocol.TypeElection: 1}
	if !reflect.DeepEqual(got, want) || elections != 1 {
		t.Errorf("countDelta = %v, %d elections; want %v, 1", got, elections, want)
	}
	if got.total() != 14 {
		t.Errorf("total %d, want 14", got.total())
	}
	// Without a joiner every presence broadcast is periodic; a node whose
	// counts went down restarted and counts from zero.
	after[2] = counts(1001, 0, protocol.TypePresence, 1.0)
	got, _ = countDelta(before, after, seen[:0], nil, nil, 0)
	if got[protocol.TypePresence] != 2+1+3 {
		t.Errorf("presence without a joiner and with a restart: %v, want 6", got)
	}
}

func TestPollInterval(t *testing.T) {
	base, limit := pollBounds(5)
	if base != time.Millisecond || limit != 20*time.Millisecond {
		t.Errorf("pollBounds(5) = %v, %v", base, limit)
	}
	base101, limit101 := pollBounds(101)
	if base101 != 10100*time.Microsecond || limit101 != 202*time.Millisecond {
		t.Errorf("pollBounds(101) = %v, %v", base101, limit101)
	}
	for _, tt := range []struct{ elapsed, want time.Duration }{
		{0, time.Millisecond}, {10 * time.Millisecond, time.Millisecond}, {100 * time.Millisecond, 4 * time.Millisecond}, {4 * time.Second, 20 * time.Millisecond},
	} {
		if got := pollInterval(tt.elapsed, base, limit); got != tt.want {
			t.Errorf("pollInterval(%v) = %v, want %v", tt.elapsed, got, tt.want)
		}
	}
}

func TestTypesCell(t *testing.T) {
	if got := typesCell(nil); got != "-" {
		t.Errorf("no samples: %q", got)
	}
	got := typesCell([]typeCounts{
		{protocol.TypePresence: 100, protocol.TypeElection: 1, protocol.TypeCoordinator: 1},
		{protocol.TypePresence: 102, protocol.TypeCoordinator: 1},
	})
	if want := "102 (102..103): presence 101, coordinator 1, election 0.5"; got != want {
		t.Errorf("typesCell = %q, want %q", got, want)
	}
	if got := typesCell([]typeCounts{{}, {}}); got != "0 (0..0)" {
		t.Errorf("nothing sent: %q", got)
	}
}

// The table of members that come and go: the static column of the same
// algorithm and size beside each dynamic one, the static cell of the
// rows that have one, "-" in the others.
func TestDynTable(t *testing.T) {
	static := &result{algorithm: protocol.Bully, n: 5, crash: millis(6, 8), rejoin: millis(70, 90), coldStart: 80 * time.Millisecond, rejoinMsgs: []int{2, 2}}
	other := &result{algorithm: protocol.Byzantine, n: 4, crash: millis(200)}
	dyn := &dynResult{
		algorithm: protocol.Bully, n: 5, low: 1, coldStart: 100 * time.Millisecond,
		joinTop: []joinSample{
			{presence: 10 * time.Millisecond, seen: 12 * time.Millisecond, knows: 600 * time.Millisecond, leader: 90 * time.Millisecond, newTerms: 1, started: 1,
				msgs: typeCounts{protocol.TypePresence: 4, protocol.TypeElection: 1, protocol.TypeCoordinator: 1}},
		},
		leaderCrash: []departSample{{leader: 9 * time.Millisecond, removed: 5 * time.Millisecond, newTerms: 1, started: 1}},
		memberHang:  []departSample{{removed: 4 * time.Second}},
		idleCPU:     []float64{0.5, 1}, presences: 4,
	}
	ring := &dynResult{algorithm: protocol.Ring, n: 5}
	cols := dynColumns([]*result{other, static}, []*dynResult{dyn, ring})
	var headers []string
	for _, c := range cols {
		headers = append(headers, c.header())
	}
	if want := []string{"bully 5", "bully 5 dynamic", "ring 5 dynamic"}; !slices.Equal(headers, want) {
		t.Fatalf("columns %q, want %q", headers, want)
	}
	var out bytes.Buffer
	printDynTable(&out, []*result{other, static}, []*dynResult{dyn, ring})
	row := func(name string) []string {
		for _, l := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(l, name+"  "); ok {
				return strings.Fields(strings.ReplaceAll(strings.TrimSpace(rest), " ms", "ms"))
			}
		}
		t.Fatalf("no row %q in\n%s", name, out.String())
		return nil
	}
	for name, want := range map[string][]string{
		"leader crash (SIGKILL): every survivor names the new leader (static: crash failover) p50":                        {"6.0ms", "9.0ms", "-"},
		"leader crash (SIGKILL): no survivor lists it p50":                                                                {"-", "5.0ms", "-"},
		"join of the highest ID: every member names it the leader, from its start (static: rejoin of the highest ID) max": {"90.0ms", "90.0ms", "-"},
		"join of the highest ID: every member lists it, from its first presence broadcast p50":                            {"-", "2.0ms", "-"},
		"join of the highest ID: it lists every member, from its start p50":                                               {"-", "600.0ms", "-"},
		"member below the leader, hang (SIGSTOP): no survivor lists it max":                                               {"-", "4000.0ms", "-"},
		"presence broadcasts per second at idle, cluster":                                                                 {"-", "4", "-"},
		"cold start to agreed leader (dynamic: n−1 members, until they also list each other)":                             {"80.0ms", "100.0ms", "-"},
	} {
		if got := row(name); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := strings.Join(row("messages per join of the highest ID, by type (static: per rejoin)"), " "); got != "2 (2..2) 6 (6..6): presence 4, coordinator 1, election 1 -" {
		t.Errorf("messages per join: %q", got)
	}
	md := dynMarkdownTable([]*result{static}, []*dynResult{dyn})
	if !strings.HasPrefix(md, "| | bully 5 | bully 5 dynamic |\n|---|---|---|\n| cold start") {
		t.Errorf("markdown table starts %q", md[:min(len(md), 80)])
	}
	if strings.Count(md, "\n| ") != len(dynRows()) {
		t.Errorf("markdown table: %d rows, want %d", strings.Count(md, "\n| "), len(dynRows()))
	}
}

// The section of members that come and go goes before raft's in a
// benchmarks.md without it; a run at the same sizes replaces its block,
// one at other sizes adds its own; a run of the static benchmark alone
// keeps the section.
func TestDynSection(t *testing.T) {
	doc := "# Benchmarks\n\nMain table.\n\n## Beside hashicorp/raft\n\nRaft.\n"
	block5 := "### At 5 members\n\nFirst run.\n"
	got := spliceDynBlock(doc, block5)
	want := "# Benchmarks\n\nMain table.\n\n" + dynSectionHeading + "\n\n" + dynSectionIntro + "\n\n### At 5 members\n\nFirst run.\n\n## Beside hashicorp/raft\n\nRaft.\n"
	if got != want {
		t.Fatalf("first block:\n%s\nwant:\n%s", got, want)
	}
	got = spliceDynBlock(got, "### At 101 members\n\nBig run.\n")
	got = spliceDynBlock(got, "### At 5 members\n\nSecond run.\n")
	want = "# Benchmarks\n\nMain table.\n\n" + dynSectionHeading + "\n\n" + dynSectionIntro + "\n\n### At 5 members\n\nSecond run.\n\n### At 101 members\n\nBig run.\n\n## Beside hashicorp/raft\n\nRaft.\n"
	if got != want {
		t.Errorf("blocks replaced and added:\n%s\nwant:\n%s", got, want)
	}
	// A document without a second-level heading gets the section at its end.
	if got := spliceDynBlock("# Benchmarks\n\nTable.\n", block5); !strings.HasSuffix(got, "Table.\n\n"+dynSectionHeading+"\n\n"+dynSectionIntro+"\n\n"+block5) {
		t.Errorf("at the end:\n%s", got)
	}
	// The static benchmark rewrites the file and keeps the section.
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks.md")
	if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	kept, err := keepDynSection(path, []byte("# Benchmarks\n\nNew table.\n\n## Beside hashicorp/raft\n\nNew raft.\n"))
	if err != nil {
		t.Fatal(err)
	}
	wantKept := "# Benchmarks\n\nNew table.\n\n" + dynSectionHeading + "\n\n" + dynSectionIntro + "\n\n### At 5 members\n\nSecond run.\n\n### At 101 members\n\nBig run.\n\n## Beside hashicorp/raft\n\nNew raft.\n"
	if string(kept) != wantKept {
		t.Errorf("kept:\n%s\nwant:\n%s", kept, wantKept)
	}
	if kept, err := keepDynSection(filepath.Join(dir, "none.md"), []byte("x\n")); err != nil || string(kept) != "x\n" {
		t.Errorf("no earlier file: %q, %v", kept, err)
	}
}

func TestCPUBusy(t *testing.T) {
	got, err := cpuBusy("cpu  100 20 30 5000 40 5 6 7 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	// user, nice, system, irq, softirq, steal: 168 ticks of 10 ms.
	if err != nil || got != 1680*time.Millisecond {
		t.Errorf("cpuBusy = %v, %v; want 1.68s", got, err)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu a b c d e f g h"} {
		if _, err := cpuBusy(bad); err == nil {
			t.Errorf("cpuBusy(%q): no error", bad)
		}
	}
}

// waitMembers polls each node until its condition holds, and says which
// did not within the time-out and what they listed.
func TestWaitMembers(t *testing.T) {
	var mu sync.Mutex
	members := map[uint64][]uint64{}
	var nodes []*localcluster.Node
	for id := uint64(1); id <= 20; id++ {
		members[id] = []uint64{id}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			json.NewEncoder(w).Encode(protocol.Status{ID: id, Members: members[id]})
		}))
		defer srv.Close()
		nodes = append(nodes, &localcluster.Node{ID: id, HTTPAddr: strings.TrimPrefix(srv.URL, "http://")})
	}
	e := &environment{cfg: config{timeout: 2 * time.Second}, http: localcluster.NewHTTPClient()}
	conds := map[*localcluster.Node]memberCond{}
	for _, n := range nodes {
		conds[n] = lists(21)
	}
	// Half of them list 21 at once, the others 50 ms later.
	for id := uint64(1); id <= 10; id++ {
		members[id] = []uint64{id, 21}
	}
	t0 := time.Now()
	go func() {
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for id := uint64(11); id <= 20; id++ {
			members[id] = []uint64{id, 21}
		}
	}()
	at, err := e.waitMembers(t.Context(), conds, t0, len(nodes))
	if err != nil {
		t.Fatal(err)
	}
	if d := at.Sub(t0); d < 50*time.Millisecond || d > time.Second {
		t.Errorf("all listed 21 after %v, want from 50 ms on", d)
	}
	e.cfg.timeout = 100 * time.Millisecond
	_, err = e.waitMembers(t.Context(), map[*localcluster.Node]memberCond{nodes[0]: listsNot(21), nodes[1]: lists(2)}, time.Now(), len(nodes))
	if err == nil || !strings.Contains(err.Error(), "node 1 lists [1 21]") || strings.Contains(err.Error(), "node 2") {
		t.Errorf("time-out: %v, want node 1 named with what it lists, node 2 not", err)
	}
}
