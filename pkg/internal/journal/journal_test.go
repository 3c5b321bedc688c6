package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func open(t *testing.T, path string) (*Journal, map[string][]byte) {
	t.Helper()
	j, last, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, last
}

func appendAll(t *testing.T, j *Journal, batches ...[]Record) {
	t.Helper()
	for _, b := range batches {
		if err := j.Append(b); err != nil {
			t.Fatal(err)
		}
	}
}

func want(t *testing.T, got map[string][]byte, w map[string]string) {
	t.Helper()
	if len(got) != len(w) {
		t.Fatalf("keys: got %d %q, want %d %q", len(got), got, len(w), w)
	}
	for k, v := range w {
		if !bytes.Equal(got[k], []byte(v)) {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

var (
	batch1 = []Record{{"a/state.json", []byte(`{"term":1}`)}, {"b/state.json", []byte(`{"term":1}`)}}
	batch2 = []Record{{"a/state.json", []byte(`{"term":2}`)}, {"c/state.json", nil}}
)

func TestAppendThenOpenGivesTheLastValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	j, last := open(t, path)
	if len(last) != 0 {
		t.Fatalf("a new journal holds %q", last)
	}
	appendAll(t, j, batch1, batch2, nil)
	size := j.Size()
	if info, err := os.Stat(path); err != nil || info.Size() != size {
		t.Fatalf("size %d, file %v %v", size, info, err)
	}
	j.Close()
	_, last = open(t, path)
	want(t, last, map[string]string{"a/state.json": `{"term":2}`, "b/state.json": `{"term":1}`, "c/state.json": ""})
}

func TestATornLastBatchIsDroppedWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.journal")
	j, _ := open(t, path)
	appendAll(t, j, batch1)
	good := j.Size()
	appendAll(t, j, batch2)
	full := j.Size()
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every cut inside the second batch leaves the first batch alone.
	for cut := good; cut < full; cut++ {
		p := filepath.Join(dir, "cut.journal")
		if err := os.WriteFile(p, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		j, last, err := Open(p)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		want(t, last, map[string]string{"a/state.json": `{"term":1}`, "b/state.json": `{"term":1}`})
		if j.Size() != good {
			t.Errorf("cut at %d: size %d, want %d", cut, j.Size(), good)
		}
		// The torn tail is gone: what follows is read back.
		appendAll(t, j, batch2)
		j.Close()
		j, last = open(t, p)
		want(t, last, map[string]string{"a/state.json": `{"term":2}`, "b/state.json": `{"term":1}`, "c/state.json": ""})
		j.Close()
	}
	// A last batch whose bytes were not all written, or a length without
	// its data (zeros).
	for _, tail := range [][]byte{
		append(bytes.Clone(data[:full-1]), data[full-1]^0xff),
		append(bytes.Clone(data[:good]), make([]byte, 100)...),
	} {
		p := filepath.Join(dir, "torn.journal")
		if err := os.WriteFile(p, tail, 0o600); err != nil {
			t.Fatal(err)
		}
		j, last, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		want(t, last, map[string]string{"a/state.json": `{"term":1}`, "b/state.json": `{"term":1}`})
		j.Close()
	}
}

func TestACorruptBatchBeforeTheEndIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	j, _ := open(t, path)
	appendAll(t, j, batch1, batch2)
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[headerSize+2] ^= 0xff // inside the first batch
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

func TestResetEmpties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	j, _ := open(t, path)
	appendAll(t, j, batch1)
	if err := j.Reset(); err != nil {
		t.Fatal(err)
	}
	if j.Size() != 0 {
		t.Fatalf("size %d after Reset", j.Size())
	}
	appendAll(t, j, batch2)
	j.Close()
	_, last := open(t, path)
	want(t, last, map[string]string{"a/state.json": `{"term":2}`, "c/state.json": ""})
}

func TestOneProcessAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	open(t, path)
	if j, _, err := Open(path); err == nil {
		j.Close()
		t.Fatal("a second Open of a journal in use succeeded")
	}
}

func TestAFailedWriteBreaksTheJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	j, _ := open(t, path)
	j.f.Close() // every write fails from now on
	if err := j.Append(batch1); !errors.Is(err, ErrBroken) {
		t.Fatalf("got %v, want ErrBroken", err)
	}
	if err := j.Reset(); !errors.Is(err, ErrBroken) {
		t.Fatalf("Reset: got %v, want ErrBroken", err)
	}
}

func TestSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.snapshot")
	last, err := ReadSnapshot(path)
	if err != nil || len(last) != 0 {
		t.Fatalf("no snapshot: %q, %v", last, err)
	}
	if err := WriteSnapshot(path, append(slices.Clone(batch1), batch2...)); err != nil {
		t.Fatal(err)
	}
	last, err = ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	want(t, last, map[string]string{"a/state.json": `{"term":2}`, "b/state.json": `{"term":1}`, "c/state.json": ""})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{data[:3], data[:len(data)-1], append(bytes.Clone(data[:len(data)-1]), data[len(data)-1]^1)} {
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%d bytes: got %v, want ErrCorrupt", len(bad), err)
		}
	}
}
