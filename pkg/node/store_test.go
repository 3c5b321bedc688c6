package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two nodes cannot share a data directory.
func TestDataDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	s, _, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	conn := endpoint(2)
	n, err := newTestNode(conn, conn, Config{Cluster: "lock", Algorithm: "bully", Election: electionConfig(2, []uint64{1, 2}),
		DataDir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Run(t.Context()); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Run on a locked data directory: got %v, want ErrStorage saying it is in use", err)
	}
}

// A corrupt state file stops the node with an error that says what to do,
// instead of starting from nothing.
func TestCorruptStateRefused(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{`{"version":1,"term":`, `{"version":1,"term":5,"max_term":4,"incarnation":1}`,
		`{"version":9,"term":1,"max_term":1,"incarnation":1}`, `{"version":1,"term":1,"max_term":1,"incarnation":1,"x":1}`} {
		if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		s, _, err := openStore(dir)
		if err == nil {
			s.close()
			t.Errorf("state %s: opened, want an error", bad)
		} else if !errors.Is(err, ErrStorage) {
			t.Errorf("state %s: got %v, want ErrStorage", bad, err)
		}
	}
}
