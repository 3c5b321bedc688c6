package atomicfile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestWriteReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	for _, content := range []string{"first", "second, longer than the first", "3"} {
		if err := Write(path, []byte(content), 0o600); err != nil {
			t.Fatalf("Write(%q): %v", content, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("after Write(%q): got %q, %v", content, got, err)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode: got %v, %v; want 0600", info.Mode().Perm(), err)
	}
	if n, err := Clean(path); n != 0 || err != nil {
		t.Errorf("Clean after clean writes: removed %d, %v; want 0, nil", n, err)
	}
}

// A crash before the rename leaves the old file and a temporary file
// (whole or partly written): the old content is intact and Clean removes
// the temporary file.
func TestCleanAfterInterruptedWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Write(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{"state.json.tmp-123", "state.json.tmp-456"} {
		if err := os.WriteFile(filepath.Join(dir, leftover), []byte("ne"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "other.tmp-1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := Clean(path)
	if n != 2 || err != nil {
		t.Fatalf("Clean: removed %d, %v; want 2, nil", n, err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("target after Clean: got %q, want %q", got, "old")
	}
	if _, err := os.Stat(filepath.Join(dir, "other.tmp-1")); err != nil {
		t.Errorf("Clean removed a file that is not its own: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "missing", "state.json"), []byte("x"), 0o600); err == nil {
		t.Error("Write into a missing directory: got nil, want an error")
	}
}

// crashEnv makes the test binary a writer that rewrites one file for ever,
// for TestCrashAtAnyPoint to kill.
const crashEnv = "ATOMICFILE_CRASH_WRITER"

// content is version n of the file: its number followed by a body whose
// length and bytes depend on n, so a mix of two versions cannot pass for
// either.
func content(n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n", n)
	b.Write(bytes.Repeat([]byte{byte('a' + n%26)}, 100+n%4000))
	return b.Bytes()
}

func check(data []byte) (int, error) {
	line, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return 0, fmt.Errorf("no version line in %d bytes", len(data))
	}
	n, err := strconv.Atoi(string(line))
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(data, content(n)) {
		return n, fmt.Errorf("version %d is not whole (%d bytes)", n, len(data))
	}
	return n, nil
}

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		for n := 1; ; n++ {
			if err := Write(path, content(n), 0o600); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	}
	os.Exit(m.Run())
}

// A writer killed with SIGKILL at random points always leaves a whole
// version of the file, never a torn one. (The sleep only picks the moment
// of the kill; it waits for nothing.)
func TestCrashAtAnyPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state")
	rng := rand.New(rand.NewPCG(1, 2))
	last := 0
	for kill := range 20 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first writer runs until its first write is in place, however
		// slow the machine is to start it; then kill each one somewhere in
		// its loop: the delay is random, the loop is fast, so every step of
		// Write is hit across the kills.
		if kill == 0 {
			deadline := time.Now().Add(30 * time.Second)
			for _, err := os.Stat(path); err != nil; _, err = os.Stat(path) {
				if time.Now().After(deadline) {
					t.Fatal("the writer made no write in 30 s")
				}
				time.Sleep(time.Millisecond) // polls for a file another process writes
			}
		}
		time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		data, err := os.ReadFile(path)
		if err != nil {
			if last == 0 && os.IsNotExist(err) {
				continue // killed before its first rename (a busy machine may take several tries)
			}
			t.Fatalf("kill %d: %v", kill, err)
		}
		n, err := check(data)
		if err != nil {
			t.Fatalf("kill %d: torn file: %v", kill, err)
		}
		last = n
		if _, err := Clean(path); err != nil {
			t.Fatal(err)
		}
	}
	if last == 0 {
		t.Fatal("the writer never completed a write")
	}
}

func TestWriteMany(t *testing.T) {
	root := t.TempDir()
	var files []File
	for i := range 20 {
		dir := filepath.Join(root, fmt.Sprintf("e-%d", i%7))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("state-%d.json", i))
		if i%2 == 0 {
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, File{Path: path, Data: []byte(fmt.Sprintf("new %d", i))})
	}
	if err := WriteMany(files, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil || string(data) != fmt.Sprintf("new %d", i) {
			t.Errorf("%s: %q, %v", f.Path, data, err)
		}
		if info, err := os.Stat(f.Path); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v", f.Path, info.Mode(), err)
		}
	}
	temps, _ := filepath.Glob(filepath.Join(root, "*", "*"+tempInfix+"*"))
	if len(temps) != 0 {
		t.Errorf("temporary files left: %v", temps)
	}

	// A file that cannot be written fails the batch, and leaves no
	// temporary file and no new content behind.
	bad := append([]File{{Path: files[0].Path, Data: []byte("newer")}}, File{Path: filepath.Join(root, "missing", "state.json"), Data: []byte("x")})
	if err := WriteMany(bad, 0o600); err == nil {
		t.Fatal("WriteMany into a missing directory: no error")
	}
	if data, _ := os.ReadFile(files[0].Path); string(data) != "new 0" {
		t.Errorf("after a failed batch: %q, want the content before it", data)
	}
	if temps, _ := filepath.Glob(filepath.Join(root, "*", "*"+tempInfix+"*")); len(temps) != 0 {
		t.Errorf("temporary files left after a failed batch: %v", temps)
	}
}
