// Package journal is an append-only file of records, each a key and a
// value, that survives a crash: Append writes a batch of records with one
// write and makes it durable with one sync, however many records it
// holds; Open reads the file back and gives the last value of each key.
//
// Each batch is framed by its length and a CRC-32C of its content, so
// that a batch that a crash cut short is found and dropped whole at Open:
// only the last batch can be cut short, since each is synced before
// Append returns. A batch that fails its check with data after it is
// corruption, which Open reports rather than hide.
//
// A journal grows until Reset empties it: its owner first writes what it
// holds elsewhere (a snapshot, WriteSnapshot, or the state files of the
// elections of a group).
package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/baton-election/baton/pkg/internal/atomicfile"
)

// MaxBatch bounds the content of one batch: its records, each a key and
// a value with their lengths.
const MaxBatch = 64 << 20

// headerSize is a batch's frame: the content's length and its CRC-32C,
// little-endian.
const headerSize = 8

// ErrCorrupt is returned by Open for a journal whose records fail their
// checks before its end.
var ErrCorrupt = errors.New("journal: corrupt")

// ErrBroken is returned by Append after an Append or a Reset failed: what
// the file holds past the last good batch is unknown, so nothing more is
// appended to it.
var ErrBroken = errors.New("journal: a write failed; the journal takes no more")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is a key and its value.
type Record struct {
	Key   string
	Value []byte
}

// Journal is an open journal file, locked for the life of the process so
// that two processes cannot append to it. It is not safe for concurrent
// use: one goroutine owns it.
type Journal struct {
	f      *os.File
	size   int64
	broken error
}

// Open opens the journal at path, creating it if needed, locks it, and
// reads its records: the last value of each key. A batch cut short at the
// end of the file is dropped and the file truncated after the last whole
// batch.
func Open(path string) (*Journal, map[string][]byte, error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: %s is in use by another process (%v)", path, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// The new file's name must survive a crash with its first records.
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	last, good, err := read(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	if info.Size() > good {
		// A batch cut short by a crash: it was never acknowledged.
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal: truncate %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("journal: fsync %s: %w", path, err)
		}
	}
	return &Journal{f: f, size: good}, last, nil
}

// read reads every batch of f from its start: the last value of each
// key, and the offset after the last whole batch.
func read(f *os.File) (map[string][]byte, int64, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	end := info.Size()
	r := bufio.NewReader(io.NewSectionReader(f, 0, end))
	last := make(map[string][]byte)
	var off int64
	var header [headerSize]byte
	for {
		if _, err := io.ReadFull(r, header[:]); err != nil {
			// The end, or a frame cut short at the end.
			return last, off, nil
		}
		n := int64(binary.LittleEndian.Uint32(header[:4]))
		sum := binary.LittleEndian.Uint32(header[4:])
		next := off + headerSize + n
		if next > end {
			// Cut short at the end: a length never written whole reads as
			// anything, and beyond the end it is the torn tail.
			return last, off, nil
		}
		if n > MaxBatch {
			return nil, 0, fmt.Errorf("batch at %d: length %d over %d", off, n, MaxBatch)
		}
		content := make([]byte, n)
		if _, err := io.ReadFull(r, content); err != nil {
			return nil, 0, fmt.Errorf("batch at %d: %w", off, err)
		}
		if n == 0 || crc32.Checksum(content, castagnoli) != sum {
			if next == end || (n == 0 && zeros(r)) {
				// The last batch, cut short; or a length that a crash left
				// without its data (zeros to the end).
				return last, off, nil
			}
			return nil, 0, fmt.Errorf("batch at %d fails its checksum, with batches after it", off)
		}
		if err := decode(content, last); err != nil {
			return nil, 0, fmt.Errorf("batch at %d: %w", off, err)
		}
		off = next
	}
}

// zeros reports whether r holds only zero bytes to its end.
func zeros(r io.ByteReader) bool {
	for {
		b, err := r.ReadByte()
		if err != nil {
			return true
		}
		if b != 0 {
			return false
		}
	}
}

// decode reads the records of a batch's content into last.
func decode(content []byte, last map[string][]byte) error {
	for len(content) > 0 {
		key, rest, err := field(content)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		value, rest, err := field(rest)
		if err != nil {
			return fmt.Errorf("value of %q: %w", key, err)
		}
		last[string(key)] = value
		content = rest
	}
	return nil
}

// field reads a length-prefixed field from b: the field, and what follows.
func field(b []byte) ([]byte, []byte, error) {
	k, n := binary.Uvarint(b)
	if n <= 0 || k > uint64(len(b)-n) {
		return nil, nil, errors.New("bad length")
	}
	end := n + int(k)
	return b[n:end:end], b[end:], nil
}

// Append writes recs at the end of the journal as one batch, with one
// write, and syncs it: when it returns nil, every record survives a
// crash. A batch that a crash cuts short is dropped whole at Open.
func (j *Journal) Append(recs []Record) error {
	if j.broken != nil {
		return j.broken
	}
	if len(recs) == 0 {
		return nil
	}
	buf := frame(recs)
	if len(buf)-headerSize > MaxBatch {
		return fmt.Errorf("journal: a batch of %d bytes over %d", len(buf)-headerSize, MaxBatch)
	}
	if _, err := j.f.Write(buf); err != nil {
		j.broken = fmt.Errorf("%w: write %s: %w", ErrBroken, j.f.Name(), err)
		return j.broken
	}
	if err := j.f.Sync(); err != nil {
		j.broken = fmt.Errorf("%w: fsync %s: %w", ErrBroken, j.f.Name(), err)
		return j.broken
	}
	j.size += int64(len(buf))
	return nil
}

// frame is recs as one batch: its length and CRC-32C, then each record's
// key and value, each with its length.
func frame(recs []Record) []byte {
	buf := make([]byte, headerSize, headerSize+len(recs)*256)
	for _, r := range recs {
		buf = binary.AppendUvarint(buf, uint64(len(r.Key)))
		buf = append(buf, r.Key...)
		buf = binary.AppendUvarint(buf, uint64(len(r.Value)))
		buf = append(buf, r.Value...)
	}
	content := buf[headerSize:]
	binary.LittleEndian.PutUint32(buf, uint32(len(content)))
	binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(content, castagnoli))
	return buf
}

// Size is the journal's length in bytes.
func (j *Journal) Size() int64 { return j.size }

// Reset empties the journal durably, once what it holds is written
// elsewhere.
func (j *Journal) Reset() error {
	if j.broken != nil {
		return j.broken
	}
	if err := j.f.Truncate(0); err != nil {
		j.broken = fmt.Errorf("%w: truncate %s: %w", ErrBroken, j.f.Name(), err)
		return j.broken
	}
	if err := j.f.Sync(); err != nil {
		j.broken = fmt.Errorf("%w: fsync %s: %w", ErrBroken, j.f.Name(), err)
		return j.broken
	}
	j.size = 0
	return nil
}

// Close closes the file, which releases the lock.
func (j *Journal) Close() error { return j.f.Close() }

// WriteSnapshot replaces the file at path, atomically and durably
// (atomicfile.Write), with recs as one batch in the journal's format: a
// journal's content, written whole, so that the journal can be emptied.
func WriteSnapshot(path string, recs []Record) error {
	return atomicfile.Write(path, frame(recs), 0o600)
}

// ReadSnapshot reads the file that WriteSnapshot wrote: the last value
// of each key, none if there is no file. A snapshot is replaced whole,
// never cut short: one that does not read is corrupt (ErrCorrupt).
func ReadSnapshot(path string) (map[string][]byte, error) {
	if _, err := atomicfile.Clean(path); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	last := make(map[string][]byte)
	if len(data) == 0 {
		return last, nil
	}
	if len(data) < headerSize {
		return nil, fmt.Errorf("%w: snapshot %s: %d bytes, shorter than its frame", ErrCorrupt, path, len(data))
	}
	if n := headerSize + int64(binary.LittleEndian.Uint32(data)); n != int64(len(data)) {
		return nil, fmt.Errorf("%w: snapshot %s: %d bytes, framed as %d", ErrCorrupt, path, len(data), n)
	}
	content := data[headerSize:]
	if crc32.Checksum(content, castagnoli) != binary.LittleEndian.Uint32(data[4:]) {
		return nil, fmt.Errorf("%w: snapshot %s fails its checksum", ErrCorrupt, path)
	}
	if err := decode(content, last); err != nil {
		return nil, fmt.Errorf("%w: snapshot %s: %w", ErrCorrupt, path, err)
	}
	return last, nil
}
