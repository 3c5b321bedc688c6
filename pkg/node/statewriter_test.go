package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The writes that wait at once go together, each lands whole, and a write
// after the writer stopped fails instead of blocking.
func TestStateWriter(t *testing.T) {
	w := newStateWriter()
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
