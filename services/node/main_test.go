package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// command runs the binary with exactly env.
func command(bin string, env map[string]string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = []string{}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// TestBinaryInvalidConfiguration: the built binary exits with status 2 and
// one line naming the variable.
func TestBinaryInvalidConfiguration(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	t.Chdir(t.TempDir()) // the default ELECTION_DATA is relative
	for _, tc := range []struct {
		env  map[string]string
		name string
	}{
		{with("NODE_ID", "-"), "NODE_ID"},
		{with("NODE_PEERS", "1,2"), "NODE_PEERS"},
		{with("ELECTION_ALGORITHM", "raft"), "ELECTION_ALGORITHM"},
	} {
		var stderr bytes.Buffer
		cmd := command(bin, tc.env)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%s: got %v, want exit status 2", tc.name, err)
		}
		if out := stderr.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, tc.name+":") {
			t.Errorf("%s: stderr %q, want one line naming it", tc.name, out)
		}
	}
}

// TestBinarySIGTERM runs the binary as a one-member cluster: it leads,
// serves its endpoints, and on SIGTERM resigns and exits with status 0
// within the 2 s of the contract. Started again with the same
// ELECTION_DATA, it announces a newer term: terms survive restarts.
func TestBinarySIGTERM(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	// The node connects as the nkey user of its member key.
	keys := writeKeys(t, 1)
	url := batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithMemberUsers(keys.parsed))
	nc := batontest.Connect(t, url, batontest.AsNode("observer", 9)...)
	leaders, err := nc.SubscribeSync(protocol.LeaderSubject("solo"))
	if err != nil {
		t.Fatal(err)
	}
	resigns, err := nc.SubscribeSync(protocol.BroadcastSubject("solo", protocol.TypeResign))
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	env := map[string]string{
		"NATS_URL": url, "NODE_ID": "1", "NODE_PEERS": "1", "ELECTION_CLUSTER": "solo",
		"HTTP_ADDR": "127.0.0.1:0", "ELECTION_DATA": t.TempDir(),
	}
	env["ELECTION_KEY_FILE"], env["ELECTION_KEYS_FILE"] = keys.seeds[1], keys.members
	var last uint64
	for run := range 2 {
		cmd, base := startBinary(t, bin, env)
		msg, err := leaders.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("run %d: no announcement: %v", run, err)
		}
		a, err := signing.ReadAnnouncementOf(keys.parsed, "solo", protocol.Bully, msg.Data, msg.Header)
		if err != nil || a.Leader != 1 || a.Cluster != "solo" || a.Algorithm != protocol.Bully {
			t.Fatalf("run %d: announcement %s: %v", run, msg.Data, err)
		}
		if a.Term <= last {
			t.Errorf("run %d: announced term %d, want above %d, announced by the run before", run, a.Term, last)
		}
		last = a.Term
		resp, err := http.Get(base + "/status")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var st map[string]any
		if err := json.Unmarshal(body, &st); err != nil || st["state"] != "leader" || st["leader"] != 1.0 {
			t.Errorf("run %d: status: got %s, want this node leading", run, body)
		}
		if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("run %d: healthz: got %v %v, want 200", run, resp, err)
		} else {
			resp.Body.Close()
		}

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("run %d: exit: got %v, want status 0", run, err)
			}
		case <-time.After(2 * time.Second): // the contract's bound
			t.Fatalf("run %d: still running 2 s after SIGTERM", run)
		}
		if _, err := resigns.NextMsg(time.Second); err != nil {
			t.Errorf("run %d: no Resign published before exit: %v", run, err)
		}
	}
}

// startBinary starts the node binary with exactly env in a temporary
// working directory, and returns it with the base URL of its HTTP
// endpoints, read from its "serving HTTP" log line.
func startBinary(t *testing.T, bin string, env map[string]string) (*exec.Cmd, string) {
	t.Helper()
	cmd := command(bin, env)
	cmd.Dir = t.TempDir()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="serving HTTP".* addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("no 'serving HTTP' log line")
		return nil, ""
	}
}

// TestBinaryStatusBeforeNATS: while NATS cannot be reached, /status
// answers the contract's object with no leader, /healthz 503, and SIGTERM
// still ends the node with status 0.
func TestBinaryStatusBeforeNATS(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	cmd, base := startBinary(t, bin, map[string]string{
		"NODE_ID": "2", "NODE_PEERS": "1,2,3", "ELECTION_CLUSTER": "quiet",
		"NATS_URL": "nats://127.0.0.1:1", "HTTP_ADDR": "127.0.0.1:0",
	})
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/status before NATS: %d, %v", resp.StatusCode, err)
	}
	if st.ID != 2 || st.Cluster != "quiet" || st.Algorithm != protocol.Bully || st.Leader != nil || st.State != "follower" {
		t.Fatalf("/status before NATS = %+v; want node 2 of quiet, bully, no leader, follower", st)
	}
	resp, err = http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/healthz before NATS: %d, want 503", resp.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("SIGTERM before NATS: %v, want status 0", err)
	}
}
