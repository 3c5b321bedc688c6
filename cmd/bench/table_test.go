package main

import (
	"fmt"
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
	if err != nil || cfg.rounds[101] != 2 || len(cfg.sizes) != 3 || len(cfg.algorithms) != 3 || cfg.steady != 0 {
		t.Errorf("defaults: %+v, %v; want sizes 5, 25, 101, two rounds at 101, every algorithm, no steady state", cfg, err)
	}
	cfg, err = parseFlags([]string{"-full"})
	if err != nil || cfg.rounds[5] != 20 || cfg.steady != 10*time.Minute {
		t.Errorf("-full: %+v, %v; want 20 rounds at 5 and 10 minutes of steady state", cfg, err)
	}
	for _, bad := range [][]string{{"-rounds", "-1"}, {"-sizes", "1"}, {"-sizes", "x"}, {"-algorithms", ","}, {"-algorithms", "raft"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) = nil error, want an error", bad)
		}
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
