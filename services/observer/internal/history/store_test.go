package history

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

var t0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

func leaderRec(term, leader uint64, at time.Duration) Record {
	return Record{Kind: KindLeader, Term: term, Leader: leader, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: t0.Add(at)}}
}

func endRec(term uint64, at time.Duration, reason EndReason) Record {
	return Record{Kind: KindEnd, Term: term, At: protocol.Timestamp{Time: t0.Add(at)}, Reason: string(reason)}
}

func terms(c *Cluster) []uint64 {
	var ts []uint64
	for _, l := range c.Leaderships {
		ts = append(ts, l.Term)
	}
	return ts
}

func TestApplyDeduplicatesByTerm(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept, err := s.Apply("a", leaderRec(1, 3, 0), leaderRec(1, 3, 0), leaderRec(2, 5, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 {
		t.Errorf("kept %d records, want 2", len(kept))
	}
	if kept, _ := s.Apply("a", leaderRec(2, 5, time.Second)); len(kept) != 0 {
		t.Errorf("redelivered leader kept: %v", kept)
	}
	c, _ := s.Cluster("a")
	if got := terms(c); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("terms = %v, want [1 2]", got)
	}
}

func TestReopenKeepsHistoryAndDropsDuplicateLines(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply("a", leaderRec(1, 3, 0), endRec(1, time.Second, EndResign), leaderRec(2, 5, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A duplicate written by hand (two observers once shared the
	// directory) and a line torn by a kill in the middle of a write.
	f, err := os.OpenFile(filepath.Join(dir, "a.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"kind":"leader","term":2,"leader":5,"algorithm":"bully","at":"2026-11-21T22:00:02Z"}` + "\n" + `{"kind":"leader","te`)
	f.Close()

	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, ok := s.Cluster("a")
	if !ok {
		t.Fatal("cluster a lost on reopen")
	}
	if got := terms(c); len(got) != 2 {
		t.Fatalf("terms = %v, want [1 2]", got)
	}
	if got, want := c.Leaderships[0].EndReason, EndResign; got != want {
		t.Errorf("end reason = %q, want %q", got, want)
	}
	gap, known := c.GapBefore(1)
	if !known || gap != time.Second {
		t.Errorf("gap before term 2 = %v (known %v), want 1s", gap, known)
	}
	// The torn line is gone: the next append starts on a line of its own.
	if _, err := s.Apply("a", leaderRec(3, 4, 3*time.Second)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ = s.Cluster("a")
	if got := terms(c); len(got) != 3 {
		t.Errorf("terms after torn line = %v, want [1 2 3]", got)
	}
}

func TestOpenRejectsCorruptLine(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte("not json\n"), 0o644)
	if _, err := Open(dir, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open = %v, want ErrCorrupt", err)
	}
}

func TestEndResumeAndSplit(t *testing.T) {
	c := &Cluster{}
	for _, r := range []Record{
		leaderRec(1, 3, 0),
		endRec(1, time.Second, EndSilent),
		endRec(1, 2*time.Second, EndResign), // already ended: dropped
		{Kind: KindResume, Term: 1},
		{Kind: KindSplit, Reason: SplitSameTerm, Leaders: []Acting{{3, 1}, {4, 1}}},
	} {
		if c.accepts(r) {
			c.apply(r)
		}
	}
	cur, ok := c.Current()
	if !ok || cur.Term != 1 {
		t.Fatalf("current = %+v, %v; want term 1 resumed", cur, ok)
	}
	if !c.SplitBrainOf(cur) {
		t.Error("term 1 not marked as split brain")
	}
	if c.accepts(Record{Kind: KindResume, Term: 1}) {
		t.Error("resume of a live leadership accepted")
	}
}

// Compact keeps the last leaderships and the split brains that involve
// them, survives a reopen, and refuses records of compacted terms, so an
// old announcement redelivered afterwards is not recorded again.
func TestCompact(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for term := uint64(1); term <= 10; term++ {
		at := time.Duration(term) * time.Second
		recs = append(recs, leaderRec(term, term%5+1, at), endRec(term, at+900*time.Millisecond, EndSilent))
	}
	recs = append(recs, leaderRec(11, 5, 11*time.Second),
		Record{Kind: KindSplit, At: protocol.Timestamp{Time: t0.Add(2 * time.Second)}, Reason: SplitStaleLeader, Leaders: []Acting{{1, 1}, {3, 2}}},
		Record{Kind: KindSplit, At: protocol.Timestamp{Time: t0.Add(9 * time.Second)}, Reason: SplitSameTerm, Leaders: []Acting{{4, 9}, {5, 9}}})
	if _, err := s.Apply("a", recs...); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Cluster("a")

	if n, err := s.Compact("a", 20); err != nil || n != 0 {
		t.Fatalf("Compact to 20 of 11 = %d, %v; want nothing to do", n, err)
	}
	if n, err := s.Compact("a", 4); err != nil || n != 7 {
		t.Fatalf("Compact to 4 = %d, %v; want 7 dropped", n, err)
	}
	check := func(when string, c *Cluster) {
		t.Helper()
		if got := terms(c); len(got) != 4 || got[0] != 8 || got[3] != 11 {
			t.Errorf("%s: terms = %v, want [8 9 10 11]", when, got)
		}
		if c.Floor != 8 {
			t.Errorf("%s: floor = %d, want 8", when, c.Floor)
		}
		for i, l := range c.Leaderships {
			if want := before.Leaderships[7+i]; l != want {
				t.Errorf("%s: leadership %d = %+v, want %+v as before", when, l.Term, l, want)
			}
		}
		if len(c.SplitBrains) != 1 || c.SplitBrains[0].Reason != SplitSameTerm {
			t.Errorf("%s: split brains = %+v, want the one of term 9", when, c.SplitBrains)
		}
	}
	c, _ := s.Cluster("a")
	check("after compacting", c)

	// Writes go on in the new file; compacted terms are refused.
	if kept, err := s.Apply("a", leaderRec(3, 4, 3*time.Second), endRec(11, 12*time.Second, EndResign), leaderRec(12, 1, 13*time.Second)); err != nil || len(kept) != 2 {
		t.Fatalf("after compacting: kept %v, %v; want the end of 11 and term 12", kept, err)
	}
	s.Close()
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ = s.Cluster("a")
	if got := terms(c); len(got) != 5 || got[4] != 12 {
		t.Fatalf("reopened: terms = %v, want [8 9 10 11 12]", got)
	}
	c.Leaderships = c.Leaderships[:4]
	c.Leaderships[3].EndedAt, c.Leaderships[3].EndReason = time.Time{}, ""
	check("reopened", c)
	if _, err := os.Stat(filepath.Join(dir, "a"+fileSuffix+".compact")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the compaction's temporary file is left: %v", err)
	}
}

// Cluster.Apply is the store's fold without the disk: it keeps what
// changes the cluster and says so; Store.Read shows the cluster in place.
func TestClusterApplyAndRead(t *testing.T) {
	c := &Cluster{}
	kept := c.Apply(leaderRec(1, 3, 0), leaderRec(1, 3, 0), endRec(1, time.Second, EndSilent), endRec(1, 2*time.Second, EndResign), leaderRec(2, 4, 3*time.Second))
	if len(kept) != 3 || kept[1].Kind != KindEnd || kept[2].Term != 2 {
		t.Errorf("kept %+v, want term 1, its first end, term 2", kept)
	}
	if i, ok := c.Index(2); !ok || i != 1 {
		t.Errorf("Index(2) = %d, %v; want 1, true", i, ok)
	}
	if _, ok := c.Index(5); ok {
		t.Error("Index of an unknown term found")
	}

	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Read("a", func(*Cluster) { t.Error("Read called f for an unknown cluster") }) {
		t.Error("Read of an unknown cluster reported one")
	}
	if _, err := s.Apply("a", leaderRec(1, 3, 0)); err != nil {
		t.Fatal(err)
	}
	var n int
	if !s.Read("a", func(c *Cluster) { n = len(c.Leaderships) }) || n != 1 {
		t.Errorf("Read of a: %d leaderships, want 1", n)
	}
}

// faultyFile is a cluster file that fails as a full disk does: a write
// stores only its first room bytes, then fails; sync and truncate fail
// while told to.
type faultyFile struct {
	*os.File
	room                int // bytes a write may still store; <0: any
	failSync, failTrunc bool
}

var errDiskFull = errors.New("no space left on device (injected)")

func (f *faultyFile) Write(b []byte) (int, error) {
	if f.room < 0 || len(b) <= f.room {
		if f.room >= 0 {
			f.room -= len(b)
		}
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:f.room])
	f.room = 0
	return n, errDiskFull
}

func (f *faultyFile) Sync() error {
	if f.failSync {
		return errors.New("sync failed (injected)")
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if f.failTrunc {
		return errors.New("truncate failed (injected)")
	}
	return f.File.Truncate(size)
}

// appendFaults are the faults of an append: a full disk, a failed sync.
var appendFaults = []struct {
	name  string
	fault func(*faultyFile)
}{
	{"disk full", func(f *faultyFile) { f.room = 10 }},
	{"sync fails", func(f *faultyFile) { f.failSync = true }},
}

// faultyStore opens a store on dir whose cluster files are the returned
// faultyFile, once opened; it starts without faults.
func faultyStore(t *testing.T, dir string) (*Store, *faultyFile) {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ff := &faultyFile{room: -1}
	s.open = func(path string) (appendFile, error) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		ff.File = f
		return ff, err
	}
	return s, ff
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// An append that fails (the disk is full, the sync fails) is cut off the
// file, so that it holds only whole lines, and reported; the history in
// memory is unchanged, later appends go on, and the file loads. A cut
// that fails itself is tried again before the next append, which is
// refused until it succeeds.
func TestFailedAppendIsRolledBack(t *testing.T) {
	for _, tc := range appendFaults {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a"+fileSuffix)
			s, ff := faultyStore(t, dir)
			if _, err := s.Apply("a", leaderRec(1, 3, 0)); err != nil {
				t.Fatal(err)
			}
			whole := fileSize(t, path)

			tc.fault(ff)
			if kept, err := s.Apply("a", endRec(1, time.Second, EndResign), leaderRec(2, 5, 2*time.Second)); err == nil {
				t.Fatalf("Apply with a fault = %v, nil; want an error", kept)
			}
			if got := fileSize(t, path); got != whole {
				t.Errorf("file size after a failed append = %d, want %d (whole lines only)", got, whole)
			}
			if c, _ := s.Cluster("a"); len(c.Leaderships) != 1 || c.Leaderships[0].Ended() {
				t.Errorf("history after a failed append = %+v, want term 1 lasting", c.Leaderships)
			}

			*ff = faultyFile{File: ff.File, room: -1}
			if _, err := s.Apply("a", endRec(1, time.Second, EndResign), leaderRec(2, 5, 2*time.Second)); err != nil {
				t.Fatalf("Apply after the fault: %v", err)
			}
			s.Close()
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatalf("Open after a failed append: %v", err)
			}
			defer s.Close()
			c, _ := s.Cluster("a")
			if got := terms(c); len(got) != 2 || c.Leaderships[0].EndReason != EndResign {
				t.Errorf("reopened: %+v, want term 1 ended by resign, then term 2", c.Leaderships)
			}
		})
	}

	t.Run("cut fails", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "a"+fileSuffix)
		s, ff := faultyStore(t, dir)
		if _, err := s.Apply("a", leaderRec(1, 3, 0)); err != nil {
			t.Fatal(err)
		}
		whole := fileSize(t, path)
		ff.room, ff.failTrunc = 10, true
		if _, err := s.Apply("a", leaderRec(2, 5, time.Second)); err == nil {
			t.Fatal("Apply with a full disk and a failing cut = nil error")
		}
		ff.room = -1
		if _, err := s.Apply("a", leaderRec(2, 5, time.Second)); err == nil {
			t.Fatal("Apply after a cut that failed = nil error, want it refused until the cut succeeds")
		}
		if got := fileSize(t, path); got != whole+10 {
			t.Errorf("file size = %d, want %d: nothing appended after the torn write", got, whole+10)
		}
		ff.failTrunc = false
		if _, err := s.Apply("a", leaderRec(2, 5, time.Second)); err != nil {
			t.Fatalf("Apply once the cut succeeds: %v", err)
		}
		s.Close()
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer s.Close()
		if c, _ := s.Cluster("a"); len(terms(c)) != 2 {
			t.Errorf("reopened: terms %v, want [1 2]", terms(c))
		}
	})
}

// logged collects the records of a logger.
type logged struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

// A last line without its newline (a crash in the middle of an append,
// which was never acknowledged) is dropped with a warning; a line that
// does not parse anywhere else, the last one included once it has its
// newline, is corruption and fails the load.
func TestOpenDropsTornLastLineOnly(t *testing.T) {
	good := `{"kind":"leader","term":1,"leader":3,"algorithm":"bully","at":"2026-11-21T22:00:00Z"}` + "\n"
	for _, tc := range []struct {
		name, content string
		corrupt       bool
		terms         int
	}{
		{"torn json", good + `{"kind":"leader","te`, false, 1},
		{"torn but whole record", good + strings.TrimSuffix(strings.ReplaceAll(good, `"term":1`, `"term":2`), "\n"), false, 1},
		{"bad line in the middle", good + "not json\n" + good, true, 0},
		{"bad last line with its newline", good + `{"kind":"leader","te` + "\n", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a"+fileSuffix)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			log := &logged{}
			s, err := Open(dir, slog.New(log))
			if tc.corrupt {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("Open = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open = %v, want the torn line dropped", err)
			}
			defer s.Close()
			if c, _ := s.Cluster("a"); len(c.Leaderships) != tc.terms {
				t.Errorf("terms %v, want %d", terms(c), tc.terms)
			}
			if got := fileSize(t, path); got != int64(len(good)) {
				t.Errorf("file size = %d, want %d: the torn line cut off", got, len(good))
			}
			if len(log.records) != 1 || log.records[0].Level != slog.LevelWarn {
				t.Fatalf("logged %v, want one warning", log.records)
			}
			attrs := map[string]string{}
			log.records[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if attrs["file"] != path || attrs["bytes"] != strconv.Itoa(len(tc.content)-len(good)) {
				t.Errorf("warning %q %v, want the file %s and the %d bytes dropped", log.records[0].Message, attrs, path, len(tc.content)-len(good))
			}
		})
	}
}
