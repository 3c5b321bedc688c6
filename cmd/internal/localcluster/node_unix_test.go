//go:build unix

package localcluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// deadline bounds each wait of these tests; reaching it is a failure.
const deadline = 30 * time.Second

// TestStopWaitsForItsOwnProcess: a node started again as soon as its
// exit is reported, as devcluster's restart does, must not keep Stop
// waiting for the new process.
func TestStopWaitsForItsOwnProcess(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "node")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exits := make(chan Exit, 1)
	nodes, err := NewNodes(Spec{Binary: bin, IDs: []uint64{1}, HTTPAddrs: []string{"127.0.0.1:1"}, LogDir: dir, Exits: exits})
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	first := n.Pid()
	stopped := make(chan StopResult, 1)
	go func() { stopped <- n.Stop(deadline) }()
	var e Exit
	select {
	case e = <-exits:
	case <-time.After(deadline):
		t.Fatal("no exit reported after Stop")
	}
	if e.Pid != first || ExitText(e.Err) != "killed by signal 15 (terminated)" {
		t.Errorf("exit of pid %d: %+v (%s), want pid %d killed by SIGTERM", first, e, ExitText(e.Err), first)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(deadline) })
	select {
	case r := <-stopped:
		if r.Killed || ExitText(r.Err) != "killed by signal 15 (terminated)" {
			t.Errorf("Stop: %+v, want the first process's exit by SIGTERM", r)
		}
	case <-time.After(deadline):
		t.Fatalf("Stop still waits %s after its process (pid %d) exited; the node runs again as pid %d", deadline, first, n.Pid())
	}
	if !n.Running() || n.Pid() == first {
		t.Errorf("the node's second process (pid %d) does not run", n.Pid())
	}
}
