package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/internal/batontest"
)

// output reads devcluster's output line by line, each read bounded by
// stopDeadline, and keeps what it read for failure messages.
type output struct {
	t    *testing.T
	file *os.File
	r    *bufio.Reader
	seen strings.Builder
}

func newOutput(t *testing.T, f *os.File) *output {
	return &output{t: t, file: f, r: bufio.NewReader(f)}
}

// expect reads lines until one matches re and returns its submatches. It
// fails the test if devcluster's output ends, or no such line comes
// within stopDeadline.
func (o *output) expect(re *regexp.Regexp) []string {
	o.t.Helper()
	if err := o.file.SetReadDeadline(time.Now().Add(stopDeadline)); err != nil {
		o.t.Fatal(err)
	}
	for {
		line, err := o.r.ReadString('\n')
		o.seen.WriteString(line)
		if m := re.FindStringSubmatch(line); m != nil {
			return m
		}
		if err != nil {
			o.t.Fatalf("devcluster printed no line matching %q (%v); its output:\n%s", re, err, o.seen.String())
		}
	}
}

// rest reads the output to its end, once every process holding it has
// exited.
func (o *output) rest() string {
	o.t.Helper()
	if err := o.file.SetReadDeadline(time.Now().Add(stopDeadline)); err != nil {
		o.t.Fatal(err)
	}
	for {
		line, err := o.r.ReadString('\n')
		o.seen.WriteString(line)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			o.t.Fatalf("devcluster still runs %s after it was told to stop; its output:\n%s", stopDeadline, o.seen.String())
		}
		if err != nil {
			return o.seen.String()
		}
	}
}

// environ reads one variable of process pid's environment, "" if unset.
func environ(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatalf("environment of process %d: %v", pid, err)
	}
	// The last value set wins, as for the process itself.
	value := ""
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			value = string(v)
		}
	}
	return value
}

var (
	readyLine   = regexp.MustCompile(`Ctrl-C stops`)
	natsLine    = regexp.MustCompile(`devcluster: NATS (nats://\S+) .*Ctrl-C stops`)
	controlLine = regexp.MustCompile(`devcluster: control at http://127\.0\.0\.1:(\d+)/`)
	allDeadLine = regexp.MustCompile(`every node has exited; NATS and the observer keep running`)
)

// started reads the lines of nodes ids of cluster "default" starting, in
// order, and returns their process IDs.
func (o *output) started(ids ...uint64) map[uint64]int {
	o.t.Helper()
	pids := make(map[uint64]int, len(ids))
	for _, id := range ids {
		pid, err := strconv.Atoi(o.expect(startedLine("default", id))[1])
		if err != nil {
			o.t.Fatal(err)
		}
		pids[id] = pid
	}
	return pids
}

// startedLine matches the line devcluster prints when node id of cluster
// starts; its first submatch is the PID.
func startedLine(cluster string, id uint64) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`devcluster: node %s/%d started: pid (\d+), status http://\S+/status`, cluster, id))
}

// exitedLine matches the line devcluster prints when process pid of node
// id of cluster exits, with how.
func exitedLine(cluster string, id uint64, pid int, how string) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`devcluster: node %s/%d \(pid %d\) exited: %s`, cluster, id, pid, regexp.QuoteMeta(how)))
}

// leaderLine matches an announcement of leader id in cluster, as
// devcluster prints it.
func leaderLine(cluster string, id uint64) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`cluster=%s leader=%d term=`, cluster, id))
}

func TestEveryNodeDeadLeavesNATSAndTheObserverUp(t *testing.T) {
	cmd, r, ready := start(t, "devcluster", devclusterArgs(t))
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := newOutput(t, r)
	natsURL := out.expect(natsLine)[1]
	for range childCount {
		c, err := ready.Accept()
		if err != nil {
			t.Fatalf("not every node and the observer said it runs: %v", err)
		}
		c.Close()
	}
	started := out.seen.String()
	nodes := map[int]uint64{} // PID to node ID
	observer := 0
	for _, p := range children(t, cmd.Process.Pid) {
		id := environ(t, p, "NODE_ID")
		if id == "" {
			observer = p
			continue
		}
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			t.Fatalf("process %d has NODE_ID %q", p, id)
		}
		nodes[p] = n
	}
	if len(nodes) != childCount-1 || observer == 0 {
		t.Fatalf("devcluster runs nodes %v and observer %d, want 3 nodes and the observer", nodes, observer)
	}

	for p := range nodes {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	out.expect(allDeadLine)
	text := out.seen.String()
	for p, id := range nodes {
		if !startedLine("default", id).MatchString(started) || !strings.Contains(started, fmt.Sprintf("started: pid %d,", p)) {
			t.Errorf("devcluster did not show node %d's PID %d when it started; its output:\n%s", id, p, started)
		}
		if !exitedLine("default", id, p, "killed by signal 9 (killed)").MatchString(text) {
			t.Errorf("devcluster did not say how node %d (pid %d) exited; its output:\n%s", id, p, text)
		}
	}
	if !alive(cmd.Process.Pid) || !alive(observer) {
		t.Fatalf("devcluster (running %v) or the observer (running %v) stopped with the last node", alive(cmd.Process.Pid), alive(observer))
	}
	nc, err := nats.Connect(natsURL, localcluster.AsApp(), nats.Timeout(stopDeadline))
	if err != nil {
		t.Fatalf("NATS stopped with the last node: %v", err)
	}
	err = nc.Flush()
	nc.Close()
	if err != nil {
		t.Fatalf("NATS stopped with the last node: %v", err)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	text = out.rest()
	if err := cmd.Wait(); err != nil {
		t.Errorf("devcluster after SIGINT: %v, want exit status 0; its output:\n%s", err, text)
	}
	if lingers(observer) {
		t.Errorf("the observer (pid %d) still runs after devcluster exited", observer)
	}
}

// control runs the test binary as devcluster's control client with args
// and returns its output and exit error.
func control(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), roleEnv+"=devcluster")
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func TestRestartBringsANodeBack(t *testing.T) {
	node := batontest.BuildBinary(t, "github.com/baton-election/baton/services/node")
	logs := t.TempDir()
	cmd, r, _ := start(t, "devcluster", []string{"-nodes", "3", "-binary", node, "-observer", "",
		"-nats-port", "-1", "-control-port", "-1", "-http-port", "20201", "-keys", "off", "-logs", logs})
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := newOutput(t, r)
	port := out.expect(controlLine)[1]
	pids := out.started(1, 2, 3)
	out.expect(readyLine)
	out.expect(leaderLine("default", 3))
	data := environ(t, pids[3], "ELECTION_DATA")

	// The leader is killed as a newcomer would (kill -9 <pid>); the next
	// takes over.
	if err := syscall.Kill(pids[3], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out.expect(exitedLine("default", 3, pids[3], "killed by signal 9 (killed)"))
	out.expect(leaderLine("default", 2))

	// Restarted, it has the same ID and data directory, starts an election
	// and, the highest ID, takes over again (Bully).
	text, err := control(t, "restart", "-control-port", port, "3")
	if err != nil {
		t.Fatalf("restart 3: %v\n%s", err, text)
	}
	pid, err := strconv.Atoi(out.expect(startedLine("default", 3))[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, fmt.Sprintf("pid %d", pid)) {
		t.Errorf("restart 3 answered %q, want it to name the new PID %d", text, pid)
	}
	if pid == pids[3] || environ(t, pid, "NODE_ID") != "3" || environ(t, pid, "ELECTION_DATA") != data {
		t.Fatalf("node 3 restarted as pid %d (was %d) with NODE_ID %q and ELECTION_DATA %q, want NODE_ID 3 and %q",
			pid, pids[3], environ(t, pid, "NODE_ID"), environ(t, pid, "ELECTION_DATA"), data)
	}
	out.expect(leaderLine("default", 3))
	client := localcluster.NewHTTPClient()
	batontest.CheckFor(t, stopDeadline, func() error {
		s, err := localcluster.FetchStatus(context.Background(), client, "127.0.0.1:20203")
		if err != nil {
			return err
		}
		if s.ID != 3 || s.Leader == nil || *s.Leader != 3 {
			return fmt.Errorf("node 3's status: %+v, want node 3 leading", s)
		}
		return nil
	})

	// A running node is stopped (SIGTERM), then started again.
	if text, err := control(t, "restart", "-control-port", port, "2"); err != nil ||
		!strings.Contains(text, fmt.Sprintf("node default/2 (pid %d) exited: exit status 0; node default/2 started: pid ", pids[2])) {
		t.Fatalf("restart 2: %v\n%s", err, text)
	}
	out.expect(exitedLine("default", 2, pids[2], "exit status 0"))
	out.expect(startedLine("default", 2))

	// kill stops a node; a node that does not run cannot be killed; bad
	// node references are refused with what is wrong.
	if text, err := control(t, "kill", "-control-port", port, "1"); err != nil || !strings.Contains(text, "exited: exit status 0") {
		t.Fatalf("kill 1: %v\n%s", err, text)
	}
	out.expect(exitedLine("default", 1, pids[1], "exit status 0"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kill", "-control-port", port, "1"}, "node default/1 is not running"},
		{[]string{"restart", "-control-port", port, "9"}, "no node 9: the nodes are 1..3"},
		{[]string{"restart", "-control-port", port, "x"}, `"x" is not a node`},
		{[]string{"restart", "-control-port", port, "ring/1"}, `no cluster "ring"`},
		{[]string{"restart", "-control-port", port}, "name one node"},
	} {
		text, err := control(t, c.args...)
		if err == nil || !strings.Contains(text, c.want) {
			t.Errorf("%v: %v, %q; want an error saying %q", c.args, err, text, c.want)
		}
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	text = out.rest()
	if err := cmd.Wait(); err != nil {
		t.Errorf("devcluster after SIGINT: %v, want exit status 0; its output:\n%s", err, text)
	}
	if _, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
		t.Errorf("the control endpoint still answers after devcluster exited")
	}
}

// With -membership dynamic, the nodes connect to NATS with their
// credentials, which the embedded server checks: all are present, none
// has the node user's password, and a node's death is the server's
// connection event to the others, not a time-out.
func TestDynamicMembersConnectWithCredentials(t *testing.T) {
	node := batontest.BuildBinary(t, "github.com/baton-election/baton/services/node")
	logs := t.TempDir()
	cmd, r, _ := start(t, "devcluster", []string{"-nodes", "3", "-binary", node, "-observer", "",
		"-nats-port", "-1", "-control-port", "-1", "-http-port", "20211", "-keys", "on", "-membership", "dynamic", "-logs", logs})
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := newOutput(t, r)
	pids := out.started(1, 2, 3)
	out.expect(readyLine)
	out.expect(regexp.MustCompile(`member credentials in .*; each node connects to NATS with its own`))
	out.expect(leaderLine("default", 3))
	if user := environ(t, pids[3], "NATS_USER"); user != "" {
		t.Errorf("node 3 has NATS_USER=%q, want none: it connects with its credential", user)
	}
	client := localcluster.NewHTTPClient()
	batontest.CheckFor(t, stopDeadline, func() error {
		s, err := localcluster.FetchStatus(context.Background(), client, "127.0.0.1:20211")
		if err != nil {
			return err
		}
		if len(s.Members) != 3 {
			return fmt.Errorf("node 1's members %v, want 1, 2 and 3", s.Members)
		}
		return nil
	})
	if err := syscall.Kill(pids[3], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out.expect(leaderLine("default", 2))
	log, err := os.ReadFile(filepath.Join(logs, "default", "node-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte("reason=connection_closed")) {
		t.Errorf("node 1 did not learn of the leader's death from its connection event; its log:\n%s", log)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	text := out.rest()
	if err := cmd.Wait(); err != nil {
		t.Errorf("devcluster after SIGINT: %v; its output:\n%s", err, text)
	}
}

// A byzantine cluster with -membership dynamic: nodes 1 to 4 are the
// configured members, 5 and 6 join with their credentials and 6, the
// highest, leads; killed, it is removed from the member set and 5 leads.
func TestByzantineMembersJoinAndLeave(t *testing.T) {
	node := batontest.BuildBinary(t, "github.com/baton-election/baton/services/node")
	logs := t.TempDir()
	cmd, r, _ := start(t, "devcluster", []string{"-nodes", "6", "-algorithm", "byzantine", "-binary", node, "-observer", "",
		"-nats-port", "-1", "-control-port", "-1", "-http-port", "20221", "-keys", "on", "-membership", "dynamic", "-logs", logs})
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := newOutput(t, r)
	pids := out.started(1, 2, 3, 4, 5, 6)
	out.expect(readyLine)
	out.expect(leaderLine("default", 6))
	client := localcluster.NewHTTPClient()
	members := func(want ...uint64) error {
		s, err := localcluster.FetchStatus(context.Background(), client, "127.0.0.1:20221")
		if err != nil {
			return err
		}
		if !slices.Equal(s.Members, want) {
			return fmt.Errorf("node 1's member set %v, want %v", s.Members, want)
		}
		return nil
	}
	batontest.CheckFor(t, stopDeadline, func() error { return members(1, 2, 3, 4, 5, 6) })
	if err := syscall.Kill(pids[6], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out.expect(leaderLine("default", 5))
	batontest.CheckFor(t, stopDeadline, func() error { return members(1, 2, 3, 4, 5) })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	text := out.rest()
	if err := cmd.Wait(); err != nil {
		t.Errorf("devcluster after SIGINT: %v; its output:\n%s", err, text)
	}
}
