package main

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestParseElections(t *testing.T) {
	for _, c := range []struct {
		in    string
		every []int
		own   map[protocol.Algorithm][]int
		err   string
	}{
		{"", nil, nil, ""},
		{"none", nil, nil, ""},
		{"1000, 1,100", []int{1, 100, 1000}, map[protocol.Algorithm][]int{}, ""},
		{"1,100;bully=10000,1", []int{1, 100}, map[protocol.Algorithm][]int{protocol.Bully: {1, 10000}}, ""},
		{"0", nil, nil, "not a number of elections"},
		{"20000", nil, nil, "not a number of elections"},
		{"5,x", nil, nil, "not a number of elections"},
		{"5,5", nil, nil, "5 twice"},
		{"1;2", nil, nil, "two lists without"},
		{"byzantine=4", nil, nil, "not bully, ring or paxos"},
		{"bully=1;bully=2", nil, nil, "two lists for bully"},
	} {
		every, own, err := parseElections(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseElections(%q) = %v, %v, %v; want an error with %q", c.in, every, own, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(every, c.every) || !maps.EqualFunc(own, c.own, slices.Equal) {
			t.Errorf("parseElections(%q) = %v, %v, %v; want %v, %v", c.in, every, own, err, c.every, c.own)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	before := localcluster.ParseMetrics(`
lag_bucket{le="0.001"} 1
lag_bucket{le="0.01"} 1
lag_bucket{le="0.1"} 1
lag_bucket{le="+Inf"} 1
lag_count 1
`)
	after := localcluster.ParseMetrics(`
lag_bucket{le="0.001"} 1
lag_bucket{le="0.01"} 6
lag_bucket{le="0.1"} 11
lag_bucket{le="+Inf"} 12
lag_count 12
other_bucket{le="1"} 5
`)
	h := histogramDelta(before, after, "lag")
	if h.count != 11 || !slices.Equal(h.counts, []float64{0, 5, 10, 11}) {
		t.Fatalf("delta = %+v", h)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// Rank 5.5 lies in (0.01, 0.1], after 5 of the 5 in that bucket.
	if q := h.quantile(0.5); !near(q, 0.01+0.09*0.5/5) {
		t.Errorf("p50 = %v", q)
	}
	// Rank 2.2 lies in (0.001, 0.01].
	if q := h.quantile(0.2); !near(q, 0.001+0.009*2.2/5) {
		t.Errorf("p20 = %v", q)
	}
	// In the +Inf bucket: the highest finite bound.
	if q := h.quantile(0.99); q != 0.1 {
		t.Errorf("p99 = %v", q)
	}
	if q := histogramDelta(after, after, "lag").quantile(0.5); !math.IsNaN(q) {
		t.Errorf("no observations: %v, want NaN", q)
	}
	if q := histogramDelta(nil, after, "missing").quantile(0.5); !math.IsNaN(q) {
		t.Errorf("no histogram: %v, want NaN", q)
	}
}

func TestSpread(t *testing.T) {
	lo, hi, sd := spread([]int{2, 4, 4, 4, 5, 5, 7, 9})
	if lo != 2 || hi != 9 || sd != 2 {
		t.Errorf("spread = %d, %d, %v; want 2, 9, 2", lo, hi, sd)
	}
	if lo, hi, sd := spread(nil); lo != 0 || hi != 0 || sd != 0 {
		t.Errorf("spread(nil) = %d, %d, %v", lo, hi, sd)
	}
}

func TestAgreedLeader(t *testing.T) {
	views := []map[string]uint64{{"a": 3, "b": 2}, {"a": 3, "b": 4}, {"a": 3}}
	if l, ok := agreedLeader(views, "a", 0); !ok || l != 3 {
		t.Errorf("a: %d, %t", l, ok)
	}
	if _, ok := agreedLeader(views, "a", 3); ok {
		t.Error("a agreed on the excluded leader")
	}
	if _, ok := agreedLeader(views, "b", 0); ok {
		t.Error("b agreed though split and missing")
	}
	if _, ok := agreedLeader(append(views[:1:1], nil), "a", 0); ok {
		t.Error("agreed though a process did not answer")
	}
	if _, ok := agreedLeader(nil, "a", 0); ok {
		t.Error("agreed without views")
	}
}

func TestManyTable(t *testing.T) {
	one := &manyResult{algorithm: protocol.Bully, n: 1, poll: 5 * time.Millisecond,
		start: 200 * time.Millisecond, leaders: []int{0, 0, 0, 0, 1},
		cpu: []float64{0.2, 0.3, 0.2, 0.2, 0.4}, rss: []int64{10 << 20, 10 << 20, 10 << 20, 10 << 20, 10 << 20},
		failover: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}, led: 1, killed: 5}
	many := &manyResult{algorithm: protocol.Bully, n: 1000, poll: 25 * time.Millisecond,
		start: 2 * time.Second, leaders: []int{190, 210, 200, 200, 200},
		cpu: []float64{20, 21, 22, 23, 24}, rss: []int64{110 << 20, 110 << 20, 110 << 20, 110 << 20, 110 << 20},
		failover: []time.Duration{30 * time.Millisecond, 50 * time.Millisecond}, led: 210, killed: 2, loadAvg: "1.00 2.00 3.00"}
	stuck := &manyResult{algorithm: protocol.Paxos, n: 10000, bound: 300 * time.Second, poll: 205 * time.Millisecond,
		err: errors.New("start: 37 elections not agreed")}
	short := &manyResult{algorithm: protocol.Bully, n: 10000, bound: 300 * time.Second, poll: 205 * time.Millisecond,
		stopped: "stopped after 3m0s: 4000 MiB available", rss: []int64{4 << 30, 4 << 30},
		err: errShortOfMemory}
	table := manyTable([]*manyResult{one, many, stuck, short})
	for _, want := range []string{
		"| | target | bully 1 | bully 1,000 | paxos 10,000 | bully 10,000 |",
		"| did not settle within 5m0s |",
		"| 190 / 210 / 6.3 |",
		"| 22.0% (24.0%) |",
		"| 102 KiB |",
		"| 2.5× ✗ |",
		"| 0.5 | 500 | 5000 | 5000 |",
		"| did not settle; stopped after 3m0s: 4000 MiB available |",
		"| 4096.0 (4096.0) MiB |",
		"| 1.00 2.00 3.00 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if n := strings.Count(table, "\n"); n != len(manyRows(nil))+2 {
		t.Errorf("%d lines, want %d:\n%s", n, len(manyRows(nil))+2, table)
	}
}

func TestInsertManySection(t *testing.T) {
	doc := "# Benchmarks\n\nmain table\n\n## Members that come and go\n\ndyn\n"
	doc = insertSection(doc, manySectionHeading, manySectionHeading+"\n\nfirst\n")
	doc = insertSection(doc, manySectionHeading, manySectionHeading+"\n\nsecond\n")
	want := "# Benchmarks\n\nmain table\n\n" + manySectionHeading + "\n\nsecond\n\n## Members that come and go\n\ndyn\n"
	if doc != want {
		t.Errorf("got\n%s\nwant\n%s", doc, want)
	}
}

// A failover's time is when the last process came to name the agreed
// leader, unless a process has no since for it, or one outside the wait.
func TestAgreedSince(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	at := t0.Add(100 * time.Millisecond)
	since := []map[string]time.Time{
		{"a": t0.Add(10 * time.Millisecond), "b": t0.Add(20 * time.Millisecond), "c": t0.Add(-time.Second)},
		{"a": t0.Add(30 * time.Millisecond), "b": t0.Add(5 * time.Millisecond), "c": t0.Add(5 * time.Millisecond)},
	}
	for c, want := range map[string]time.Time{
		"a": t0.Add(30 * time.Millisecond), // the later of the two
		"b": t0.Add(20 * time.Millisecond),
		"c": at, // one named it before the kill: the poll's time
		"d": at, // none has a since
	} {
		if got := agreedSince(since, c, t0, at); !got.Equal(want) {
			t.Errorf("%s: got %v after t0, want %v", c, got.Sub(t0), want.Sub(t0))
		}
	}
}
