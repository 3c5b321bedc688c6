package main

import (
	"testing"
	"time"
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
	cfg, err := parseFlags([]string{"-rounds", "3", "-steady", "5s", "-algorithms", "ring, bully"})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if cfg.rounds != 3 || cfg.steady != 5*time.Second || len(cfg.algorithms) != 2 || cfg.algorithms[0] != "ring" || cfg.algorithms[1] != "bully" {
		t.Errorf("parseFlags = %+v, want 3 rounds, 5s steady, [ring bully]", cfg)
	}
	for _, bad := range [][]string{{"-rounds", "0"}, {"-nodes", "1"}, {"-algorithms", ","}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) = nil error, want an error", bad)
		}
	}
}
