package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/baton-election/baton/pkg/internal/journal"
)

// The writes that wait at once go together, each lands whole, and a write
// after the writer stopped fails instead of blocking.
func TestStateWriter(t *testing.T) {
	w := newStateWriter("")
	go w.run()
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 300)
	for i := range errs {
		wg.Go(func() {
			sub := filepath.Join(dir, fmt.Sprint(i))
			if err := os.Mkdir(sub, 0o700); err != nil {
				errs[i] = err
				return
			}
			errs[i] = w.write(filepath.Join(sub, stateFile), []byte(fmt.Sprintf("%d\n", i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if data, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i), stateFile)); err != nil || string(data) != fmt.Sprintf("%d\n", i) {
			t.Fatalf("file %d: %q, %v", i, data, err)
		}
	}
	if err := w.write(filepath.Join(dir, "missing", stateFile), []byte("x")); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
	close(w.stop)
	<-w.done
	if err := w.write(filepath.Join(dir, "0", stateFile), []byte("late")); !errors.Is(err, errWriterStopped) {
		t.Errorf("write after stop: %v", err)
	}
}

// stateOf is the content of a state file of term and incarnation.
func stateOf(t *testing.T, term, incarnation uint64) []byte {
	t.Helper()
	st := stored{Version: stateVersion, Incarnation: incarnation}
	st.Term, st.MaxTerm = term, term
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

func readState(t *testing.T, path string) stored {
	t.Helper()
	st, err := readStored(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// With a journal, a write lands in the journal and the state file is
// written from it when the election leaves (release) or the writer
// stops; the journal is then empty.
func TestStateWriterJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.journal")
	w := newStateWriter(path)
	if err := w.open(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	go w.run()
	var files []string
	for i := range 3 {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.Join(sub, stateFile))
	}
	var states [][]byte // terms 1 to 5
	for term := range uint64(5) {
		states = append(states, stateOf(t, term+1, 7))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(files))
	for i, f := range files {
		wg.Go(func() {
			for _, st := range states {
				if errs[i] = w.write(f, st); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s written before its election left: %v", f, err)
		}
	}
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		t.Fatalf("journal: %v, %v", info, err)
	}
	if err := w.release(files[0]); err != nil {
		t.Fatal(err)
	}
	if st := readState(t, files[0]); st.Term != 5 {
		t.Fatalf("released: term %d, want 5", st.Term)
	}
	if _, err := os.Stat(files[1]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s written with another's release: %v", files[1], err)
	}
	close(w.stop)
	<-w.done
	for _, f := range files {
		if st := readState(t, f); st.Term != 5 {
			t.Fatalf("%s after stop: term %d, want 5", f, st.Term)
		}
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 0 {
		t.Fatalf("journal after stop: %v, %v", info, err)
	}
}

// After a crash, the states in the journal are written to their files at
// the next open, unless a later process wrote the file (a larger
// incarnation) or the election's directory is gone; the journal is then
// empty.
func TestStateWriterJournalAfterACrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.journal")
	for _, sub := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// b's file was written later, by a process of a larger incarnation.
	if err := os.WriteFile(filepath.Join(dir, "b", stateFile), stateOf(t, 3, 9), 0o600); err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]journal.Record{
		{Key: filepath.Join("a", stateFile), Value: stateOf(t, 1, 8)},
		{Key: filepath.Join("b", stateFile), Value: stateOf(t, 2, 8)},
		{Key: filepath.Join("gone", stateFile), Value: stateOf(t, 2, 8)},
	}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]journal.Record{{Key: filepath.Join("a", stateFile), Value: stateOf(t, 4, 8)}}); err != nil {
		t.Fatal(err)
	}
	j.Close() // a crash: nothing written from it

	w := newStateWriter(path)
	if err := w.open(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if st := readState(t, filepath.Join(dir, "a", stateFile)); st.Term != 4 || st.Incarnation != 8 {
		t.Errorf("a: %+v, want term 4 of incarnation 8", st)
	}
	if st := readState(t, filepath.Join(dir, "b", stateFile)); st.Term != 3 || st.Incarnation != 9 {
		t.Errorf("b: %+v, want the later file's term 3 of incarnation 9", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory gone was made again: %v", err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 0 {
		t.Fatalf("journal after open: %v, %v", info, err)
	}
	go w.run()
	close(w.stop)
	<-w.done
}

// A journal that does not read stops the group's start with ErrStorage,
// and a journal in use by another group too.
func TestStateWriterJournalRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.journal")
	first := newStateWriter(path)
	if err := first.open(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if err := newStateWriter(path).open(slog.New(slog.DiscardHandler)); !errors.Is(err, ErrStorage) {
		t.Errorf("a journal in use: %v, want ErrStorage", err)
	}
	go first.run()
	close(first.stop)
	<-first.done

	j, _, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]journal.Record{{Key: "x/" + stateFile, Value: []byte("not a state")}}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := newStateWriter(path).open(slog.New(slog.DiscardHandler)); !errors.Is(err, ErrStorage) {
		t.Errorf("a state that does not read: %v, want ErrStorage", err)
	}
}

// Past its size bound, the journal is emptied into a snapshot, not into
// the state files; after a crash, the next writer writes the files from
// the snapshot and the journal, the later state of each.
func TestStateWriterJournalSnapshot(t *testing.T) {
	dir, crashed := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "state.journal")
	w := newStateWriter(path)
	w.maxJournal = 300
	if err := w.open(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	go w.run()
	var files []string
	for i := range 3 {
		for _, d := range []string{dir, crashed} {
			if err := os.Mkdir(filepath.Join(d, fmt.Sprint(i)), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, filepath.Join(dir, fmt.Sprint(i), stateFile))
	}
	for term := range uint64(20) {
		for _, f := range files {
			if err := w.write(f, stateOf(t, term+1, 7)); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot := path + ".snapshot"
	if _, err := os.Stat(snapshot); err != nil {
		t.Fatalf("no snapshot past the bound: %v", err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() > 1000 {
		t.Fatalf("journal past the bound: %v, %v", info, err)
	}
	for _, f := range files {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s written by the snapshot: %v", f, err)
		}
	}
	// A crash now: what the next writer finds.
	for _, name := range []string{"state.journal", "state.journal.snapshot"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	close(w.stop)
	<-w.done
	next := newStateWriter(filepath.Join(crashed, "state.journal"))
	if err := next.open(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	go next.run()
	for _, d := range []string{dir, crashed} {
		for i := range files {
			if st := readState(t, filepath.Join(d, fmt.Sprint(i), stateFile)); st.Term != 20 {
				t.Errorf("%s/%d: term %d, want 20", d, i, st.Term)
			}
		}
		if _, err := os.Stat(filepath.Join(d, "state.journal.snapshot")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the snapshot is still there: %v", d, err)
		}
		if info, err := os.Stat(filepath.Join(d, "state.journal")); err != nil || info.Size() != 0 {
			t.Errorf("%s: journal %v, %v", d, info, err)
		}
	}
	close(next.stop)
	<-next.done
}

// Writes that become ready together go together also where the process
// has one P: the writer lets every ready writer queue its write before it
// takes the batch, instead of taking each write alone as its writer hands
// it over (a thousand elections failing over at once, one sync each).
// Without that, here, one run in three had a round that took one batch
// per write: the runtime did not take the P from the writer during its
// sync, and each writer ran only after the previous write was done.
func TestStateWriterBatchesOnOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	dir := t.TempDir()
	w := newStateWriter(filepath.Join(dir, "state.journal"))
	if err := w.open(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	go w.run()
	defer func() {
		close(w.stop)
		<-w.done
	}()
	const writers, rounds = 200, 30
	var files []string
	for i := range writers {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.Join(sub, stateFile))
	}
	for round := range rounds {
		// Each writer waits for its own event, as an election's loop
		// waits on its lanes, and one goroutine delivers them in turn.
		events := make([]chan struct{}, writers)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i, f := range files {
			events[i] = make(chan struct{}, 1)
			wg.Go(func() {
				<-events[i]
				errs[i] = w.write(f, stateOf(t, uint64(round+1), 7))
			})
		}
		before := w.batchesTaken()
		deliver := make(chan struct{})
		go func() {
			defer close(deliver)
			for _, ev := range events {
				ev <- struct{}{}
			}
		}()
		<-deliver
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, write %d: %v", round, i, err)
			}
		}
		// All at once would be 1; a few more if the scheduler interleaves.
		if n := w.batchesTaken() - before; n > writers/10 {
			t.Fatalf("round %d: %d writes that became ready together took %d batches, want at most %d", round, writers, n, writers/10)
		}
	}
}
