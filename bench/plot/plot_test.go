package plot

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteFailoverWritesSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "failover.svg")
	series := []Series{
		{Name: "bully 5", P50: 12 * time.Millisecond, P90: 15 * time.Millisecond, Max: 20 * time.Millisecond},
		{Name: "ring 101", P50: 40 * time.Millisecond, P90: 60 * time.Millisecond, Max: 90 * time.Millisecond},
		{Name: "raft 150ms 5", P50: 300 * time.Millisecond, P90: 320 * time.Millisecond, Max: 330 * time.Millisecond},
		{Name: "raft default 5", P50: 1600 * time.Millisecond, P90: 1900 * time.Millisecond, Max: 2 * time.Second},
	}
	caption := "2 cores, linux, 2026-11-24"
	if err := WriteFailover(path, caption, series); err != nil {
		t.Fatalf("WriteFailover: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatal("empty file")
	}
	// Well-formed XML whose root is <svg>.
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("root element: got %q, want svg", root)
	}
	// vgsvg writes text as <text> elements.
	text := string(data)
	for _, want := range []string{">bully 5<", ">raft 150ms 5<", ">" + caption + "<", ">p50<", ">max<", ">1000<"} {
		if !strings.Contains(text, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestWriteFailoverRejects(t *testing.T) {
	dir := t.TempDir()
	ok := Series{Name: "a", P50: time.Millisecond, P90: 2 * time.Millisecond, Max: 3 * time.Millisecond}
	for _, tc := range []struct {
		name   string
		path   string
		series []Series
	}{
		{"no series", "x.svg", nil},
		{"not svg", "x.png", []Series{ok}},
		{"no name", "x.svg", []Series{{P50: 1, P90: 1, Max: 1}}},
		{"twice", "x.svg", []Series{ok, ok}},
		{"zero p50", "x.svg", []Series{{Name: "a", P90: 1, Max: 1}}},
		{"p90 below p50", "x.svg", []Series{{Name: "a", P50: 2, P90: 1, Max: 3}}},
		{"max below p90", "x.svg", []Series{{Name: "a", P50: 1, P90: 3, Max: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.path)
			if err := WriteFailover(path, "", tc.series); err == nil {
				t.Fatalf("WriteFailover: got nil error, want one")
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: got stat error %v, want not exist", path, err)
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{}).Ticks(3, 250) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	got, want := strings.Join(labels, " "), "5 10 20 50 100 200"
	if got != want {
		t.Errorf("labels: got %q, want %q", got, want)
	}
}
