package node

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"github.com/baton-election/baton/pkg/internal/atomicfile"
	"github.com/baton-election/baton/pkg/internal/journal"
)

// maxStateBatch bounds the state writes handled together.
const maxStateBatch = 512

// maxJournal is the size past which a state writer with a journal writes
// the states that are not in their files yet to its snapshot, and
// empties the journal: with states of a few hundred bytes, every ten
// thousand or so writes.
const maxJournal = 4 << 20

// errWriterStopped is returned by a write after the group stopped its
// writer.
var errWriterStopped = errors.New("the group's state writer has stopped")

// stateWriter writes the states of a Group's elections: each loop hands
// it its write and waits, as it would for its own, and the writes that
// wait at once go together, sharing the waits for stable storage. A
// thousand elections that change term at once (the start of a process,
// the failure of a member that led them) pay for one or two syncs
// instead of two thousand fsyncs.
//
// With a journal (GroupConfig.StateJournal), the writes that go together
// are appended to it as one batch with one sync: the cost of a batch
// hardly grows with its size. An election's state file is then written
// later, with others (atomicfile.WriteMany): when the election leaves
// (release), when the writer stops, and at the next start after a crash
// (open). When the journal grows past maxJournal, the states not yet in
// their files are written to one snapshot file beside it (the journal's
// path with ".snapshot"), replaced atomically, and the journal is
// emptied: one file of a few MiB, where writing ten thousand state files
// would hold every write for seconds. An election's latest state is thus
// always in the journal, in the snapshot or in its state file, in that
// order of recency; while it is not in its file, the election runs and
// holds its data directory. Without a journal, the writes that go
// together replace their state files (atomicfile.WriteMany), which costs
// two syncs of the file system and a rename per file.
type stateWriter struct {
	reqs chan stateWrite
	stop chan struct{} // closed by the group to end run
	done chan struct{} // closed when run has returned

	// journalPath is the journal's file, "" for none; snapshotPath its
	// snapshot's.
	journalPath, snapshotPath string
	// journal is open from open until run returns.
	journal *journal.Journal
	// base is the journal's directory: a record's key is its state file's
	// path relative to it, so that the data directory can move.
	base string
	// dirty (run's) holds, by absolute path, the states appended to the
	// journal since their files were last written (in the journal or the
	// snapshot).
	dirty map[string][]byte
	// maxJournal is maxJournal but in tests.
	maxJournal int64
	// batches counts the batches taken.
	batches atomic.Int64
	// err (run's) is a failure to write state files from the journal:
	// every write fails from then on, as a node must not run on a state
	// that is in neither place.
	err error
}

// stateWrite is one write and where its outcome goes.
type stateWrite struct {
	file atomicfile.File
	// release: write file.Path from the journal, and forget it (the
	// election leaves); file.Data is unused.
	release bool
	err     chan error
}

// newStateWriter returns a writer; journalPath is its journal's file, ""
// for none. Its journal is opened by open, before run.
func newStateWriter(journalPath string) *stateWriter {
	return &stateWriter{
		reqs: make(chan stateWrite), stop: make(chan struct{}), done: make(chan struct{}),
		journalPath: journalPath, snapshotPath: snapshotOf(journalPath), dirty: make(map[string][]byte),
		maxJournal: maxJournal,
	}
}

// batchesTaken is how many batches of writes the writer has taken.
func (w *stateWriter) batchesTaken() int64 { return w.batches.Load() }

// snapshotOf is the snapshot file of the journal at path ("" for none).
func snapshotOf(journalPath string) string {
	if journalPath == "" {
		return ""
	}
	return journalPath + ".snapshot"
}

// open opens the journal, if there is one, and writes the states that it
// and its snapshot hold (a crash stopped the last writer before it wrote
// them) to their files, then removes the snapshot and empties the
// journal; a state file that a later process wrote (a larger
// incarnation) is left alone, and a state whose directory is gone is
// dropped. It must return before any election reads its state file.
func (w *stateWriter) open(log *slog.Logger) error {
	if w.journalPath == "" {
		return nil
	}
	path, err := filepath.Abs(w.journalPath)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	j, journaled, err := journal.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	last, err := journal.ReadSnapshot(w.snapshotPath)
	if err != nil {
		j.Close()
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	maps.Copy(last, journaled) // the journal's are the later
	w.journal, w.base = j, filepath.Dir(path)
	var files []atomicfile.File
	dropped := 0
	for key, data := range last {
		file := key
		if !filepath.IsAbs(key) {
			file = filepath.Join(w.base, key)
		}
		rec, err := decodeStored(data)
		if err != nil {
			j.Close()
			return fmt.Errorf("%w: %s holds a state of %s that does not read (%v)", ErrStorage, path, file, err)
		}
		if _, err := os.Stat(filepath.Dir(file)); errors.Is(err, os.ErrNotExist) {
			dropped++
			continue
		}
		if cur, err := readStored(file); err == nil && cur.Incarnation > rec.Incarnation {
			dropped++
			continue
		}
		files = append(files, atomicfile.File{Path: file, Data: data})
	}
	if len(files) > 0 {
		if err := atomicfile.WriteMany(files, 0o600); err != nil {
			j.Close()
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	if len(last) > 0 {
		log.Info("state journal read after a crash: states written to their files",
			"journal", path, "written", len(files), "dropped", dropped)
	}
	if err := w.forget(); err != nil {
		j.Close()
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// forget removes the snapshot and empties the journal, once every state
// they hold is in its file.
func (w *stateWriter) forget() error {
	if err := os.Remove(w.snapshotPath); err == nil {
		if err := atomicfile.SyncDir(filepath.Dir(w.snapshotPath)); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return w.journal.Reset()
}

// run writes what the loops hand over until stop is closed; then it
// writes the state files of what the journal still holds and closes it.
func (w *stateWriter) run() {
	defer close(w.done)
	if w.journal != nil {
		defer func() {
			if w.err == nil {
				w.err = w.writeFiles()
			}
			w.journal.Close()
		}()
	}
	batch := make([]stateWrite, 0, maxStateBatch)
	for {
		select {
		case <-w.stop:
			return
		case r := <-w.reqs:
			batch = append(batch[:0], r)
		}
		// The writers that are ready to run queue their writes first. The
		// one that handed over its write woke the writer, which would
		// otherwise run next, before them, where a process has one P
		// (GOMAXPROCS=1): the writes of a thousand elections failing over
		// at once, each handing over in turn, would take one sync each.
		runtime.Gosched()
	more:
		for len(batch) < maxStateBatch {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		w.batches.Add(1)
		if w.journal == nil {
			w.replace(batch)
		} else {
			w.append(batch)
		}
	}
}

// replace writes the batch's files in place, together. Without a
// journal nothing is released (release).
func (w *stateWriter) replace(batch []stateWrite) {
	files := make([]atomicfile.File, 0, len(batch))
	for _, r := range batch {
		files = append(files, r.file)
	}
	err := atomicfile.WriteMany(files, 0o600)
	for _, r := range batch {
		r.err <- err
	}
}

// append appends the batch's writes to the journal as one batch, writes
// the files of its releases, and snapshots the states not in their files
// and empties the journal once it has grown past maxJournal.
func (w *stateWriter) append(batch []stateWrite) {
	recs := make([]journal.Record, 0, len(batch))
	for _, r := range batch {
		if !r.release {
			recs = append(recs, journal.Record{Key: w.key(r.file.Path), Value: r.file.Data})
		}
	}
	err := w.err
	if err == nil {
		err = w.journal.Append(recs)
	}
	if err == nil {
		for _, r := range batch {
			if !r.release {
				w.dirty[r.file.Path] = r.file.Data
			}
		}
	}
	var files []atomicfile.File
	for _, r := range batch {
		if data, ok := w.dirty[r.file.Path]; ok && r.release {
			files = append(files, atomicfile.File{Path: r.file.Path, Data: data})
		}
	}
	relErr := w.err
	if relErr == nil && len(files) > 0 {
		if relErr = atomicfile.WriteMany(files, 0o600); relErr != nil {
			w.err = relErr
		}
		for _, f := range files {
			delete(w.dirty, f.Path)
		}
	}
	for _, r := range batch {
		if r.release {
			r.err <- relErr
		} else {
			r.err <- err
		}
	}
	if w.err == nil && w.journal.Size() > w.maxJournal {
		w.err = w.checkpoint()
	}
}

// checkpoint writes the states not in their files to the snapshot, then
// empties the journal.
func (w *stateWriter) checkpoint() error {
	recs := make([]journal.Record, 0, len(w.dirty))
	for path, data := range w.dirty {
		recs = append(recs, journal.Record{Key: w.key(path), Value: data})
	}
	if err := journal.WriteSnapshot(w.snapshotPath, recs); err != nil {
		return err
	}
	return w.journal.Reset()
}

// writeFiles writes the file of every state not in its file, then
// removes the snapshot and empties the journal: the writer stops.
func (w *stateWriter) writeFiles() error {
	if len(w.dirty) > 0 {
		files := make([]atomicfile.File, 0, len(w.dirty))
		for path, data := range w.dirty {
			files = append(files, atomicfile.File{Path: path, Data: data})
		}
		if err := atomicfile.WriteMany(files, 0o600); err != nil {
			return err
		}
		clear(w.dirty)
	}
	return w.forget()
}

// key is the journal's key of the state file at path: relative to the
// journal's directory, so that the data directory can move.
func (w *stateWriter) key(path string) string {
	key, err := filepath.Rel(w.base, path)
	if err != nil {
		return path // absolute: read back as it is
	}
	return key
}

// write writes data to path durably, with the writes of other elections
// waiting at the same time; it returns once data survives a crash, or
// with the error that kept it from it.
func (w *stateWriter) write(path string, data []byte) error {
	return w.do(path, data, false)
}

// release writes the state file at path from the journal, if the journal
// holds its state, and forgets it: the election leaves, and its state
// must be in its file before it unlocks its data directory.
func (w *stateWriter) release(path string) error {
	if w == nil || w.journalPath == "" {
		return nil
	}
	return w.do(path, nil, true)
}

func (w *stateWriter) do(path string, data []byte, release bool) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	r := stateWrite{file: atomicfile.File{Path: abs, Data: data}, release: release, err: make(chan error, 1)}
	select {
	case w.reqs <- r:
	case <-w.done:
		return errWriterStopped
	}
	return <-r.err
}

// writeFile writes data to path durably: through w, or alone if w is nil.
func (w *stateWriter) writeFile(path string, data []byte) error {
	if w == nil {
		return atomicfile.Write(path, data, os.FileMode(0o600))
	}
	return w.write(path, data)
}
