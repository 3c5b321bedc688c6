package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the benchmark's loader
// processes, as the benchmark's own binary does.
func TestMain(m *testing.M) {
	if os.Getenv(loaderEnv) != "" {
		os.Exit(loaderMain())
	}
	os.Exit(m.Run())
}

func TestParseLoads(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"cpu", []string{"cpu"}},
		{" fsync , memory", []string{"fsync", "memory"}},
		{"together", []string{"together"}},
		{"all", []string{"cpu", "fsync", "memory", "procs", "cgroup", "together"}},
		{"procs,all", []string{"procs", "cpu", "fsync", "memory", "cgroup", "together"}},
	} {
		got, err := parseLoads(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseLoads(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"disk", "cpu,cpu", "cpu,,fsync,x"} {
		if _, err := parseLoads(bad); err == nil {
			t.Errorf("parseLoads(%q): no error", bad)
		}
	}
}

func TestParseFlagsLoad(t *testing.T) {
	cfg, err := parseFlags([]string{"-steady", "10s", "-load", "fsync,cgroup"})
	if err != nil || !slices.Equal(cfg.loads, []string{"fsync", "cgroup"}) {
		t.Errorf("-load fsync,cgroup: %v, %v", cfg.loads, err)
	}
	cfg, err = parseFlags([]string{"-steady", "10s"})
	if err != nil || !slices.Equal(cfg.loads, []string{"cpu"}) {
		t.Errorf("-steady without -load: %v, %v; want [cpu]", cfg.loads, err)
	}
	if _, err := parseFlags([]string{"-load", "cpu"}); err == nil || !strings.Contains(err.Error(), "-steady") {
		t.Errorf("-load without -steady: %v, want an error naming -steady", err)
	}
	if _, err := parseFlags([]string{"-steady", "1s", "-load", "swap"}); err == nil {
		t.Error("-load swap: no error")
	}
}

func TestChangeCounter(t *testing.T) {
	var c changeCounter
	// The first announcement sets the baseline; repeats and older terms
	// change nothing.
	for _, a := range [][2]uint64{{3, 5}, {3, 5}, {2, 4}, {3, 5}} {
		c.add(a[0], a[1])
	}
	if c.newTerms != 0 || c.moves != 0 {
		t.Fatalf("after repeats: %+v, want no change", c)
	}
	c.add(4, 4) // takeover by 4
	c.add(5, 5) // takeback by 5
	c.add(6, 5) // a new term, same leader
	c.add(5, 4) // late, older: ignored
	if c.newTerms != 3 || c.moves != 2 {
		t.Errorf("got %d new terms, %d leader moves; want 3 and 2", c.newTerms, c.moves)
	}
}

func TestLoadersStopAndCleanUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fsync")
	ld, err := startLoad(context.Background(), loadSpec{kind: loadFsync, dir: dir, until: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.cmds) == 0 {
		t.Fatal("no loader process started")
	}
	// The loaders write into dir: wait for a file, with a deadline.
	deadline := time.Now().Add(20 * time.Second)
	for {
		entries, _ := os.ReadDir(dir)
		if len(entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			ld.stop()
			t.Fatal("no fsync file appeared")
		}
		select {
		case <-ld.exited:
			ld.stop()
			t.Fatal("a loader exited early")
		case <-time.After(10 * time.Millisecond):
		}
	}
	ld.stop()
	for _, cmd := range ld.cmds {
		if cmd.ProcessState == nil {
			t.Errorf("loader %d not waited for", cmd.Process.Pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("fsync directory left behind: %v", err)
	}
}

func TestLoaderEndsByItself(t *testing.T) {
	// A loader bounds its own time: one whose end has passed exits at
	// once, even if nobody kills it.
	ld, err := startLoad(context.Background(), loadSpec{kind: loadProcs, until: time.Now().Add(-time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.stop()
	select {
	case <-ld.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("loader still running after its end")
	}
}

func TestMemoryShare(t *testing.T) {
	for _, tc := range []struct{ avail, want int64 }{
		{0, 0},
		{100 << 20, 50 << 20},
		{64 << 30, maxMemoryLoad},
	} {
		if got := memoryShare(tc.avail); got != tc.want {
			t.Errorf("memoryShare(%d) = %d, want %d", tc.avail, got, tc.want)
		}
	}
}

func TestLoadRows(t *testing.T) {
	quiet := &result{algorithm: "bully", n: 5}
	var b bytes.Buffer
	printTable(&b, []*result{quiet})
	if strings.Contains(b.String(), "steady state, load") {
		t.Errorf("a table without the steady state shows load rows:\n%s", b.String())
	}
	loaded := &result{algorithm: "bully", n: 5, loads: []loadResult{
		{kind: loadFsync, newTerms: 2, moves: 2, elections: 2, announced: 2},
		{kind: loadCPU},
		{kind: loadCgroup, note: "cgroup: skipped: no cgroup cpu controller"},
	}}
	b.Reset()
	printTable(&b, []*result{loaded})
	table := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"steady state, load fsync: spurious leader changes 0 2 (2 to another leader; 2 elections, 2 announced) MISSED",
		"steady state, load cpu: spurious leader changes 0 0 (0 to another leader; 0 elections, 0 announced) ok",
		"steady state, load cgroup: spurious leader changes 0 skipped",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "load memory") {
		t.Errorf("a load not run has a row:\n%s", b.String())
	}
}

func TestThrottleAndUndo(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	pid := cmd.Process.Pid
	before, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Skip("no /proc:", err)
	}
	undo, err := throttle([]int{pid})
	if err != nil {
		t.Skip("this machine allows no throttled cgroup:", err)
	}
	during, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if !strings.Contains(string(during), fmt.Sprintf("baton-bench-%d/%d", os.Getpid(), pid)) {
		t.Errorf("process not in the throttled cgroup:\n%s", during)
	}
	if err := undo(); err != nil {
		t.Errorf("undo: %v", err)
	}
	after, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if string(after) != string(before) {
		t.Errorf("cgroup after undo:\n%s\nwant\n%s", after, before)
	}
	matches, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", fmt.Sprintf("baton-bench-%d", os.Getpid())))
	more, _ := filepath.Glob(filepath.Join(cgroupRoot, fmt.Sprintf("baton-bench-%d", os.Getpid())))
	if len(matches)+len(more) > 0 {
		t.Errorf("cgroups left behind: %v %v", matches, more)
	}
}

func TestRaftLoadTable(t *testing.T) {
	got := raftLoadTable([]raftLoad{{Kind: loadCPU, Moves: 1, Lost: 3}, {Kind: loadFsync, Err: "no agreement"}}, true)
	for _, want := range []string{"| cpu | 1 (3 times a peer lost the leader) |", "| fsync | not measured: no agreement |"} {
		if !strings.Contains(got, want) {
			t.Errorf("raftLoadTable lacks %q:\n%s", want, got)
		}
	}
	if raftLoadTable(nil, false) != "" {
		t.Error("raftLoadTable(nil) is not empty")
	}
}
