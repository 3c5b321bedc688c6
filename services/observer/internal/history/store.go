package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/baton-election/baton/pkg/protocol"
)

// fileSuffix ends the name of every cluster file: <cluster>.jsonl.
const fileSuffix = ".jsonl"

// ErrCorrupt is returned by Open for a line in the middle of a file that is
// not a record.
var ErrCorrupt = errors.New("history: corrupt record")

// appendFile is what the store does with a cluster's file once loaded:
// append whole lines, sync them, and cut back what a failed append left.
// *os.File is one; tests inject faults through Store.open.
type appendFile interface {
	Write(b []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// clusterFile is the open append handle of one cluster's file.
type clusterFile struct {
	f appendFile
	// size is the length of the file's whole lines: where the next
	// append starts.
	size int64
	// torn is set when a failed append could not be cut off: the file
	// holds bytes after size, which must be cut before anything else is
	// appended.
	torn bool
	// used is when the file was last appended to, on the store's
	// counter: the least recently used is closed first.
	used uint64
}

// maxOpenFiles bounds the cluster files a store holds open for
// appending: with thousands of clusters, a handle each would exhaust the
// process's file descriptors. One more closes the least recently used,
// which is opened again at its next append.
const maxOpenFiles = 256

// Store keeps the history of every cluster, in memory and on disk. It is
// safe for concurrent use: writers are serialized; readers read in place
// under a read lock (Read, Latest) or get copies (Cluster).
type Store struct {
	dir string
	// open opens a cluster's file for appending.
	open func(path string) (appendFile, error)

	// log gets a warning when a rewrite for the caps fails.
	log *slog.Logger

	// openLimit is how many files it holds open at most (maxOpenFiles).
	openLimit int

	mu       sync.RWMutex
	clusters map[string]*Cluster
	files    map[string]*clusterFile
	// uses counts the appends, to tell the least recently used file.
	uses uint64
}

// openAppend opens path for appending, creating it.
func openAppend(path string) (appendFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// Open loads every cluster file under dir, creating dir if needed. log
// (nil: none) gets a warning for each torn last line it cuts off.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	s := &Store{dir: dir, open: openAppend, log: log, openLimit: maxOpenFiles, clusters: map[string]*Cluster{}, files: map[string]*clusterFile{}}
	paths, err := filepath.Glob(filepath.Join(dir, "*"+fileSuffix))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), fileSuffix)
		if protocol.ValidateCluster(name) != nil {
			continue
		}
		c, err := load(path, log)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.clusters[name] = c
	}
	return s, nil
}

// load folds one cluster file. A last line without its newline is torn:
// the process died in the middle of an append, which was therefore never
// acknowledged and will come again; it is cut off, with a warning. Any
// other line that is not a record is corruption, an error.
func load(path string, log *slog.Logger) (*Cluster, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	c := &Cluster{}
	r := bufio.NewReader(f)
	var good int64 // bytes up to the end of the last complete line
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(b) > 0 {
				if err := f.Truncate(good); err != nil {
					return nil, fmt.Errorf("history: cut torn line of %s: %w", path, err)
				}
				if err := f.Sync(); err != nil {
					return nil, fmt.Errorf("history: cut torn line of %s: %w", path, err)
				}
				log.Warn("dropped the torn last line of a history file, left by a write cut short", "file", path, "line", line, "bytes", len(b))
			}
			return c, nil
		}
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		good += int64(len(b))
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %v", ErrCorrupt, path, line, err)
		}
		if c.accepts(rec) {
			c.apply(rec)
		}
	}
}

// Apply records recs for cluster, in order. Records that would not change
// the history (a leadership already known, an end of one already ended)
// are dropped. The rest are written and synced to disk before the history
// in memory changes. It returns the records it kept. On error nothing
// changed, in memory or on disk: a partial write is cut back off the file.
//
// A split brain, faulty member or member event beyond its cap
// (MaxSplitBrains, MaxFaulty, MaxMembership) is kept and drops the oldest
// of its kind. Once the file holds MaxSplitBrains lines so dropped, Apply
// rewrites it without them, as Compact does; a rewrite that fails is logged and tried again at the
// next Apply (the records were written all the same).
func (s *Store) Apply(cluster string, recs ...Record) ([]Record, error) {
	kept, err := s.ApplyAll([]Batch{{Cluster: cluster, Records: recs}})
	if err != nil {
		return nil, err
	}
	return kept[0], nil
}

// Batch is the records of one cluster, for ApplyAll.
type Batch struct {
	Cluster string
	Records []Record
}

// MaxApplyAll bounds the batches of one ApplyAll: fewer than the files
// the store holds open, so that none of a call's files is closed before
// it is synced.
const MaxApplyAll = maxOpenFiles / 2

// ApplyAll applies each batch as Apply does, each of a different
// cluster, and returns the records kept of each, in order. The files
// are written first and made durable together, several with one sync
// of the file system (syncfs, on Linux) instead of one per file and one
// per new file's directory entry; only then does the history in
// memory change. On error nothing changed, in memory or on disk: every
// append is cut back off its file, so that a full disk or a failed sync
// never leaves a partial line for the next append to run into. A cut
// that fails is tried again before the next append to that file, which
// fails until it succeeds. A crash before a cut reaches the disk may
// leave whole lines of a failed append in the file: records whose input
// was never acknowledged, which come again and are dropped as
// duplicates.
func (s *Store) ApplyAll(batches []Batch) ([][]Record, error) {
	if len(batches) > MaxApplyAll {
		return nil, fmt.Errorf("history: %d batches at once, above %d", len(batches), MaxApplyAll)
	}
	seen := make(map[string]bool, len(batches))
	for _, b := range batches {
		if err := protocol.ValidateCluster(b.Cluster); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		if seen[b.Cluster] {
			return nil, fmt.Errorf("history: cluster %s twice in one ApplyAll", b.Cluster)
		}
		seen[b.Cluster] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	type written struct {
		p  prepared
		cf *clusterFile
	}
	var done []written
	created := false
	undo := func(err error) ([][]Record, error) {
		for _, w := range done {
			if cutErr := w.cf.cut(); cutErr != nil {
				w.cf.torn = true
				err = errors.Join(err, fmt.Errorf("history: cut %s back to %d bytes: %w", w.p.cluster, w.cf.size, cutErr))
			}
		}
		return nil, err
	}
	kept := make([][]Record, len(batches))
	for i, b := range batches {
		p, err := s.prepare(b.Cluster, b.Records)
		if err != nil {
			return undo(err)
		}
		if len(p.kept) == 0 {
			continue
		}
		cf, isNew, err := s.file(b.Cluster)
		if err != nil {
			return undo(err)
		}
		created = created || isNew
		if cf.torn {
			if err := cf.cut(); err != nil {
				return undo(fmt.Errorf("history: %s: cut the failed append before this one: %w", b.Cluster, err))
			}
		}
		done = append(done, written{p, cf})
		if _, err := cf.f.Write(p.data); err != nil {
			return undo(fmt.Errorf("history: append to %s: %w", b.Cluster, err))
		}
		kept[i] = p.kept
	}
	if len(done) == 0 {
		return kept, nil
	}
	files := make([]*clusterFile, len(done))
	for i, w := range done {
		files[i] = w.cf
	}
	if err := s.syncAll(files, created); err != nil {
		return undo(fmt.Errorf("history: sync: %w", err))
	}
	for _, w := range done {
		w.cf.size += int64(len(w.p.data))
		s.install(w.p)
	}
	return kept, nil
}

// syncAll makes what was written to files durable, and the directory
// entries of those just created: several files with one sync of their
// file system where it can (syncFS), one file (or where it cannot) with
// each file's sync and the directory's.
func (s *Store) syncAll(files []*clusterFile, created bool) error {
	if len(files) > 1 {
		if synced, err := syncFS(files[0].f); synced || err != nil {
			return err
		}
	}
	var errs []error
	for _, cf := range files {
		errs = append(errs, cf.f.Sync())
	}
	if created {
		syncDir(s.dir)
	}
	return errors.Join(errs...)
}

// prepared is a batch of records checked against a cluster's history:
// the records kept, their lines, and the history they make.
type prepared struct {
	cluster string
	kept    []Record
	data    []byte
	// next is the cluster's history with kept applied; nil for member
	// events alone, applied to the history in place by install.
	next *Cluster
}

// prepare checks recs against cluster's history, with s.mu held.
func (s *Store) prepare(cluster string, recs []Record) (prepared, error) {
	c := s.clusters[cluster]
	if c == nil {
		c = &Cluster{}
	}
	// Check the batch against a scratch copy, so records of one batch
	// may depend on each other. Member events depend on nothing but the
	// last one's Seq: a batch of them alone is checked against that, and
	// applied in place once written, without a copy of the cluster.
	p := prepared{cluster: cluster}
	if onlyMembers(recs) {
		p.kept = (&Cluster{memberSeq: c.memberSeq}).Apply(recs...)
	} else {
		p.next = c.clone()
		p.kept = p.next.Apply(recs...)
	}
	var buf bytes.Buffer
	for _, r := range p.kept {
		b, err := json.Marshal(r)
		if err != nil {
			return prepared{}, fmt.Errorf("history: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	p.data = buf.Bytes()
	return p, nil
}

// install makes p's records part of the history in memory, once on disk,
// and rewrites the cluster's file past its records dropped for the caps.
func (s *Store) install(p prepared) {
	next := p.next
	if next == nil {
		next = s.clusters[p.cluster]
		if next == nil {
			next = &Cluster{}
		}
		for _, r := range p.kept {
			next.apply(r)
		}
	}
	s.clusters[p.cluster] = next
	if next.stale >= maxStale {
		if _, err := s.compact(p.cluster, 0); err != nil {
			s.log.Warn("cannot rewrite the history without the records dropped for the caps; it is tried again at the next write", "cluster", p.cluster, "err", err)
		}
	}
}

// onlyMembers reports whether recs are all member events.
func onlyMembers(recs []Record) bool {
	for _, r := range recs {
		if r.Kind != KindMember {
			return false
		}
	}
	return len(recs) > 0
}

// maxStale is how many lines dropped for the caps a cluster's file may
// hold before Apply rewrites it: the file then holds at most about twice
// the capped records, besides its leaderships.
const maxStale = MaxSplitBrains

// cut truncates the file to its whole lines.
func (cf *clusterFile) cut() error {
	if err := cf.f.Truncate(cf.size); err != nil {
		return err
	}
	// The data before size was synced already; this sync makes the new
	// size durable. If it fails, the file is cut all the same, and the
	// next append's sync makes that durable too.
	cf.f.Sync()
	cf.torn = false
	return nil
}

// file returns the open append handle of cluster's file, creating it,
// and whether it created the file, whose directory entry the caller then
// syncs.
func (s *Store) file(cluster string) (*clusterFile, bool, error) {
	s.uses++
	if cf := s.files[cluster]; cf != nil {
		cf.used = s.uses
		return cf, false, nil
	}
	if len(s.files) >= s.openLimit {
		s.closeLeastUsed()
	}
	path := filepath.Join(s.dir, cluster+fileSuffix)
	var size int64
	fi, statErr := os.Stat(path)
	if statErr == nil {
		// Whole lines only: load cut off a torn last line, and
		// compaction writes whole lines.
		size = fi.Size()
	}
	f, err := s.open(path)
	if err != nil {
		return nil, false, fmt.Errorf("history: %w", err)
	}
	cf := &clusterFile{f: f, size: size, used: s.uses}
	s.files[cluster] = cf
	return cf, errors.Is(statErr, os.ErrNotExist), nil
}

// closeLeastUsed closes the file appended to least recently, but for a
// torn one, whose size only its handle knows until it is cut.
func (s *Store) closeLeastUsed() {
	var oldest string
	var cf *clusterFile
	for name, f := range s.files {
		if !f.torn && (cf == nil || f.used < cf.used) {
			oldest, cf = name, f
		}
	}
	if cf != nil {
		cf.f.Close()
		delete(s.files, oldest)
	}
}

// syncDir syncs a directory, so that files created or renamed in it
// survive a crash.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Len returns how many leaderships of cluster are recorded.
func (s *Store) Len(cluster string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c := s.clusters[cluster]; c != nil {
		return len(c.Leaderships)
	}
	return 0
}

// Compact rewrites cluster's file with only its last keep leaderships, if
// it has more (or if it holds records dropped for the caps), and returns
// how many leaderships it dropped. The new file is written and synced
// beside the old one, then renamed over it, so a crash leaves one or the
// other whole; on error the history is unchanged.
func (s *Store) Compact(cluster string, keep int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compact(cluster, keep)
}

// compact is Compact, with the lock held; keep 0 keeps every leadership.
func (s *Store) compact(cluster string, keep int) (int, error) {
	c := s.clusters[cluster]
	if c == nil {
		return 0, nil
	}
	rebuilt, recs := c.compacted(keep)
	if rebuilt == nil {
		return 0, nil
	}
	path := filepath.Join(s.dir, cluster+fileSuffix)
	tmp := path + ".compact"
	if err := writeRecords(tmp, recs); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("history: compact %s: %w", cluster, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("history: compact %s: %w", cluster, err)
	}
	syncDir(s.dir)
	// The append handle still points at the old file: reopen on the next
	// write.
	if cf := s.files[cluster]; cf != nil {
		cf.f.Close()
		delete(s.files, cluster)
	}
	dropped := len(c.Leaderships) - len(rebuilt.Leaderships)
	s.clusters[cluster] = rebuilt
	return dropped, nil
}

// writeRecords writes recs to a new file at path, one per line, and syncs
// it.
func writeRecords(path string, recs []Record) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Clusters returns the names of the clusters with a history, sorted.
func (s *Store) Clusters() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.clusters))
	for name := range s.clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Has reports whether cluster has a history.
func (s *Store) Has(cluster string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.clusters[cluster]
	return ok
}

// Count returns how many clusters have a history.
func (s *Store) Count() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.clusters)
}

// Each calls f with every cluster's history, in no particular order,
// under the store's read lock and without copying it: a pass over every
// cluster that takes the lock once. f must neither keep nor change c,
// and must not call the store; it should be quick (a writer waits for the
// whole pass).
func (s *Store) Each(f func(name string, c *Cluster)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for name, c := range s.clusters {
		f(name, c)
	}
}

// Cluster returns a copy of one cluster's whole history, or false if the
// cluster has none. It costs as much as the history: readers that need
// only part of it (a page, the latest leadership) use Read or Latest.
func (s *Store) Cluster(name string) (*Cluster, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.clusters[name]
	if !ok {
		return nil, false
	}
	return c.clone(), true
}

// Read calls f with the history of cluster under the store's read lock,
// without copying it, and reports whether the cluster has a history. f
// must neither keep nor change c, and must not call the store; it should
// be quick, since a writer waits for it (copy what is needed, and encode
// or render it after Read returns).
func (s *Store) Read(name string, f func(c *Cluster)) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.clusters[name]
	if ok {
		f(c)
	}
	return ok
}

// Latest returns the highest-term leadership of a cluster without copying
// the whole history.
func (s *Store) Latest(name string) (Leadership, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.clusters[name]
	if !ok {
		return Leadership{}, false
	}
	return c.Latest()
}

// Close closes the files. The store must not be used afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for name, cf := range s.files {
		errs = append(errs, cf.f.Close())
		delete(s.files, name)
	}
	return errors.Join(errs...)
}
