package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	out := filepath.Join(dir, "out.svg")
	if err := os.WriteFile(in, []byte(`[{"name":"bully 5","p50":15000000,"p90":25000000,"max":30000000},{"name":"raft 150ms 5","p50":280000000,"p90":290000000,"max":300000000}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", in, "-out", out, "-caption", "test"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("no SVG written: %v", err)
	}
	if err := os.WriteFile(in, []byte(`[{"name":"bad","p50":0,"p90":0,"max":0}]`), 0o644); err == nil {
		if err := run([]string{"-in", in, "-out", out}, io.Discard); err == nil {
			t.Error("a series with no p50 was drawn")
		}
	}
	if err := run([]string{"-in", in}, io.Discard); err == nil {
		t.Error("no -out accepted")
	}
}
