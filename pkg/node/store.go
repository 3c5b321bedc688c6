package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/atomicfile"
)

// The files of a node's data directory.
const (
	stateFile = "state.json"
	lockFile  = "lock"
)

// stateVersion is the format version of state.json.
const stateVersion = 1

// ErrStorage wraps every failure to read or write the data directory. A
// node that cannot store its state stops: it must not act on a term that a
// restart could forget.
var ErrStorage = errors.New("node: data directory")

// stored is the content of state.json.
type stored struct {
	Version int `json:"version"`
	election.HardState
	// Incarnation is the incarnation of the process that wrote the file;
	// the next process takes a larger one.
	Incarnation uint64 `json:"incarnation"`
}

// store is a node's data directory, locked for the life of the process so
// that two nodes cannot share it.
type store struct {
	dir  string
	lock *os.File
	// writer writes the state file with other elections' (a Group's);
	// nil: alone.
	writer *stateWriter
}

// openStore creates dir if needed, locks it and reads the stored state
// (the zero value if the node never ran there). Temporary files of a write
// interrupted by a crash are removed.
func openStore(dir string) (*store, stored, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, stored{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, stored{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, stored{}, fmt.Errorf("%w: %s is in use by another process (%v)", ErrStorage, dir, err)
	}
	s := &store{dir: dir, lock: lock}
	st, err := s.read()
	if err != nil {
		s.close()
		return nil, stored{}, err
	}
	return s, st, nil
}

func (s *store) path() string { return filepath.Join(s.dir, stateFile) }

// read returns the stored state, checked.
func (s *store) read() (stored, error) {
	if _, err := atomicfile.Clean(s.path()); err != nil {
		return stored{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return readStored(s.path())
}

// readStored reads and checks the state file at path: the zero value if
// there is none.
func readStored(path string) (stored, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	st, err := decodeStored(data)
	if err != nil {
		return stored{}, fmt.Errorf("%w: %s: %w", ErrStorage, path, err)
	}
	return st, nil
}

// decodeStored decodes and checks the content of a state file.
func decodeStored(data []byte) (stored, error) {
	var st stored
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return stored{}, fmt.Errorf("corrupt (%v); move it away to start afresh, knowing that this node may then claim a term it claimed before", err)
	}
	if st.Version != stateVersion {
		return stored{}, fmt.Errorf("format version %d, this node reads %d", st.Version, stateVersion)
	}
	if err := st.HardState.Validate(); err != nil {
		return stored{}, err
	}
	return st, nil
}

// write stores st durably: when it returns nil, st survives a crash.
func (s *store) write(st stored) error {
	st.Version = stateVersion
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if err := s.writer.writeFile(s.path(), append(data, '\n')); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// close writes the state file from the group's journal, if it holds the
// state (stateWriter.release), and releases the lock. The error is the
// write's: the lock is released all the same.
func (s *store) close() error {
	if s == nil || s.lock == nil {
		return nil
	}
	err := s.writer.release(s.path())
	s.lock.Close() // closing the descriptor releases the flock
	s.lock = nil
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}
