package node

import (
	"errors"
	"os"

	"github.com/baton-election/baton/pkg/internal/atomicfile"
)

// maxStateBatch bounds the state files written together.
const maxStateBatch = 512

// errWriterStopped is returned by a write after the group stopped its
// writer.
var errWriterStopped = errors.New("the group's state writer has stopped")

// stateWriter writes the state files of a Group's elections: each loop
// hands it its write and waits, as it would for its own, and the writes
// that wait at once go together (atomicfile.WriteMany), sharing the waits
// for stable storage. A thousand elections that change term at once (the
// start of a process, the failure of a member that led them) pay for a
// few syncs instead of two thousand fsyncs.
type stateWriter struct {
	reqs chan stateWrite
	stop chan struct{} // closed by the group to end run
	done chan struct{} // closed when run has returned
}

// stateWrite is one write and where its outcome goes.
type stateWrite struct {
	file atomicfile.File
	err  chan error
}

func newStateWriter() *stateWriter {
	return &stateWriter{reqs: make(chan stateWrite), stop: make(chan struct{}), done: make(chan struct{})}
}

// run writes what the loops hand over until stop is closed.
func (w *stateWriter) run() {
	defer close(w.done)
	batch := make([]stateWrite, 0, maxStateBatch)
	files := make([]atomicfile.File, 0, maxStateBatch)
	for {
		select {
		case <-w.stop:
			return
		case r := <-w.reqs:
			batch = append(batch[:0], r)
		}
	more:
		for len(batch) < maxStateBatch {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		files = files[:0]
		for _, r := range batch {
			files = append(files, r.file)
		}
		err := atomicfile.WriteMany(files, 0o600)
		for _, r := range batch {
			r.err <- err
		}
	}
}

// write writes data to path durably, with the writes of other elections
// waiting at the same time; it returns once data survives a crash, or
// with the error that kept it from it.
func (w *stateWriter) write(path string, data []byte) error {
	r := stateWrite{file: atomicfile.File{Path: path, Data: data}, err: make(chan error, 1)}
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
