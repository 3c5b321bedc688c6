package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays every process of these tests, by the role in this
// variable: the tool itself (devcluster), the process that starts it
// (parent, as the task runner does) and the nodes and the observer
// (child).
const roleEnv = "BATON_DEVCLUSTER_TEST_ROLE"

// readyEnv is the Unix socket on which each child says, once it catches
// SIGTERM, that it runs.
const readyEnv = "BATON_DEVCLUSTER_TEST_READY"

// stopDeadline bounds each wait of these tests; a wait that reaches it
// is a failure, not a measurement.
const stopDeadline = 60 * time.Second

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "devcluster":
		// The nodes and the observer it starts inherit the environment.
		os.Setenv(roleEnv, "child")
		main()
		os.Exit(0)
	case "parent":
		os.Exit(playParent())
	case "child":
		os.Exit(playChild())
	}
	os.Exit(m.Run())
}

// playParent starts the tool with this process's arguments and output and
// waits for it. It ignores SIGINT, as the task runner does with the first
// two it gets alone.
func playParent() int {
	signal.Ignore(os.Interrupt)
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), roleEnv+"=devcluster")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "parent:", err)
		return 1
	}
	return 0
}

// playChild stands for a node or the observer: it says that it runs, then
// runs until SIGTERM and exits with status 0.
func playChild() int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	c, err := net.Dial("unix", os.Getenv(readyEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	c.Close()
	<-term
	return 0
}

// childCount is how many processes devclusterArgs has devcluster start.
const childCount = 4

// devclusterArgs runs 3 nodes and the observer, all played by the test
// binary, on an embedded NATS server with a free port.
func devclusterArgs(t *testing.T) []string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-nodes", "3", "-binary", self, "-observer", self,
		"-nats-port", "-1", "-http-port", "20001", "-observer-port", "20000", "-control-port", "-1", "-keys", "off", "-logs", t.TempDir()}
}

// start starts the test binary in role with args, in a process group of
// its own so that signals reach only whom the test sends them to. It
// returns the process, the read end of its output, closed when every
// process holding the write end has exited, and the socket on which the
// children say that they run.
func start(t *testing.T, role string, args []string) (*exec.Cmd, *os.File, *net.UnixListener) {
	t.Helper()
	ready, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "ready"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ready.Close() })
	if err := ready.SetDeadline(time.Now().Add(stopDeadline)); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, readyEnv+"="+ready.Addr().String())
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.SetReadDeadline(time.Now().Add(stopDeadline)); err != nil {
		t.Fatal(err)
	}
	return cmd, r, ready
}

// waitReady reads the tool's output until it says how to stop it, which
// it prints once every node and the observer has started, then waits
// until each of them says that it runs.
func waitReady(t *testing.T, out *bufio.Reader, ready *net.UnixListener) {
	t.Helper()
	for {
		line, err := out.ReadString('\n')
		if strings.Contains(line, "Ctrl-C stops") {
			break
		}
		if err != nil {
			t.Fatalf("devcluster did not say it is ready: %v", err)
		}
	}
	for range childCount {
		c, err := ready.Accept()
		if err != nil {
			t.Fatalf("not every node and the observer said it runs: %v", err)
		}
		c.Close()
	}
}

// children lists the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, _, ok := procStat(p); ok && parent == pid {
			kids = append(kids, p)
		}
	}
	return kids
}

// procStat reads the parent and the state of process pid; ok is false if
// there is no such process.
func procStat(pid int) (parent int, state byte, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	parent, err = strconv.Atoi(f[1])
	if err != nil || len(f[0]) != 1 {
		return 0, 0, false
	}
	return parent, f[0][0], true
}

// alive reports whether process pid runs: it exists and is not a zombie
// (a process that has exited and waits to be reaped).
func alive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z'
}

// lingers reports whether pid still runs after a grace of 10 s: a
// process that was told to stop may take a moment on a loaded machine.
func lingers(pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(20 * time.Millisecond) // no event tells another process's exit
	}
	return false
}

// drain reads out to its end: every process holding its write end has
// exited; it returns what it read. It fails at the read deadline.
func drain(t *testing.T, out *bufio.Reader, what string) string {
	t.Helper()
	var text strings.Builder
	for {
		line, err := out.ReadString('\n')
		text.WriteString(line)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s still runs %s after its parent was stopped; its output since it was ready:\n%s", what, stopDeadline, text.String())
		}
		if err != nil {
			return text.String()
		}
	}
}

func TestSIGINTToTheToolAloneStopsEveryChild(t *testing.T) {
	cmd, r, ready := start(t, "devcluster", devclusterArgs(t))
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(r)
	waitReady(t, out, ready)
	kids := children(t, cmd.Process.Pid)
	if len(kids) != childCount {
		t.Fatalf("devcluster runs %d children, want 3 nodes and the observer", len(kids))
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	text := drain(t, out, "devcluster")
	if err := cmd.Wait(); err != nil {
		t.Errorf("devcluster after SIGINT: %v, want exit status 0; its output since it was ready:\n%s", err, text)
	}
	for _, k := range kids {
		if lingers(k) {
			t.Errorf("process %d, started by devcluster, still runs after devcluster exited", k)
		}
	}
}

func TestToolStopsWhenItsParentDies(t *testing.T) {
	parent, r, ready := start(t, "parent", devclusterArgs(t))
	t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
	out := bufio.NewReader(r)
	waitReady(t, out, ready)
	tools := children(t, parent.Process.Pid)
	if len(tools) != 1 {
		t.Fatalf("the parent runs %d children, want devcluster alone", len(tools))
	}
	tool := tools[0]
	t.Cleanup(func() { syscall.Kill(tool, syscall.SIGKILL) })
	kids := children(t, tool)
	if len(kids) != childCount {
		t.Fatalf("devcluster runs %d children, want 3 nodes and the observer", len(kids))
	}

	// SIGINT to the parent alone does nothing (it ignores it, as the task
	// runner does with the first two); then it dies without passing
	// anything on.
	if err := parent.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	drain(t, out, "devcluster")
	for _, p := range append([]int{tool}, kids...) {
		if lingers(p) {
			t.Errorf("process %d still runs after devcluster's parent died", p)
		}
	}
}
