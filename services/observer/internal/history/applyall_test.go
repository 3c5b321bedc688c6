package history

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ApplyAll writes the records of several clusters with one sync for
// them all: each is kept as Apply would keep it, and is there after a
// reopen.
func TestApplyAll(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply("a", leaderRec(1, 3, 0)); err != nil {
		t.Fatal(err)
	}
	kept, err := s.ApplyAll([]Batch{
		{"a", []Record{leaderRec(1, 3, 0)}}, // known: dropped
		{"b", []Record{leaderRec(4, 2, 0)}},
		{"c", []Record{leaderRec(2, 5, 0), endRec(2, time.Second, EndResign)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 || len(kept[0]) != 0 || len(kept[1]) != 1 || len(kept[2]) != 2 {
		t.Fatalf("kept %v, want nothing for a, 1 record for b, 2 for c", kept)
	}
	if _, err := s.ApplyAll([]Batch{{"a", nil}, {"a", nil}}); err == nil {
		t.Error("ApplyAll took one cluster twice")
	}
	if _, err := s.ApplyAll(make([]Batch, MaxApplyAll+1)); err == nil {
		t.Error("ApplyAll took more batches than its bound")
	}
	s.Close()
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, want := range map[string][]uint64{"a": {1}, "b": {4}, "c": {2}} {
		c, _ := s.Cluster(name)
		if got := terms(c); len(got) != len(want) || got[0] != want[0] {
			t.Errorf("%s reopened: terms %v, want %v", name, got, want)
		}
	}
	if c, _ := s.Cluster("c"); !c.Leaderships[0].Ended() {
		t.Errorf("c reopened: %+v, want term 2 ended", c.Leaderships)
	}
}

// When one file of an ApplyAll cannot be written or synced, nothing of
// the call stays: every file is cut back to its whole lines, the history
// in memory is unchanged, and the same call succeeds once the fault is
// gone.
func TestApplyAllRolledBack(t *testing.T) {
	for _, tc := range appendFaults {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			files := map[string]*faultyFile{}
			s.open = func(path string) (appendFile, error) {
				f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				ff := &faultyFile{File: f, room: -1}
				files[filepath.Base(path)] = ff
				return ff, err
			}
			if _, err := s.Apply("a", leaderRec(1, 3, 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Apply("b", leaderRec(1, 2, 0)); err != nil {
				t.Fatal(err)
			}
			pathA, pathB := filepath.Join(dir, "a"+fileSuffix), filepath.Join(dir, "b"+fileSuffix)
			wholeA, wholeB := fileSize(t, pathA), fileSize(t, pathB)
			tc.fault(files["b"+fileSuffix])
			batches := []Batch{
				{"a", []Record{endRec(1, time.Second, EndResign), leaderRec(2, 5, 2*time.Second)}},
				{"b", []Record{leaderRec(3, 4, time.Second)}},
			}
			if kept, err := s.ApplyAll(batches); err == nil {
				t.Fatalf("ApplyAll with a fault = %v, nil; want an error", kept)
			}
			if a, b := fileSize(t, pathA), fileSize(t, pathB); a != wholeA || b != wholeB {
				t.Errorf("file sizes after a failed ApplyAll = %d, %d; want %d, %d", a, b, wholeA, wholeB)
			}
			for _, name := range []string{"a", "b"} {
				if c, _ := s.Cluster(name); len(c.Leaderships) != 1 || c.Leaderships[0].Ended() {
					t.Errorf("%s after a failed ApplyAll: %+v, want term 1 lasting", name, c.Leaderships)
				}
			}
			ff := files["b"+fileSuffix]
			*ff = faultyFile{File: ff.File, room: -1}
			if _, err := s.ApplyAll(batches); err != nil {
				t.Fatalf("ApplyAll after the fault: %v", err)
			}
			s.Close()
			s, err = Open(dir, nil)
			if err != nil {
				t.Fatalf("Open after a failed ApplyAll: %v", err)
			}
			defer s.Close()
			if c, _ := s.Cluster("a"); len(terms(c)) != 2 {
				t.Errorf("a reopened: terms %v, want [1 2]", terms(c))
			}
			if c, _ := s.Cluster("b"); len(terms(c)) != 2 {
				t.Errorf("b reopened: terms %v, want [1 3]", terms(c))
			}
		})
	}
}
