package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 15 * time.Second

func TestInvalidConfigurationExits2(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	for _, tc := range []struct{ name, value string }{
		{"OBSERVER_LEADER_TIMEOUT", "soon"},
		{"OBSERVER_STREAM", "no.dots"},
		{"LOG_LEVEL", "loud"},
		{"OBSERVER_KEEP", "-1"},
		{"OBSERVER_KEEP", "lots"},
		{"OBSERVER_MAX_STREAMS", "0"},
		{"OBSERVER_MAX_CLUSTERS", "0"},
		{"OBSERVER_MAX_CLUSTERS", "many"},
		{"OBSERVER_MEMBER_TIMEOUT", "soon"},
		{"OBSERVER_MEMBER_TIMEOUT", "0s"},
		{"NATS_URL", "http://127.0.0.1:4222"},
		{"NATS_USER", "alice"},
		{"NATS_CREDS", "/nonexistent/observer.creds"},
	} {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), tc.name+"="+tc.value)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%s=%s: %v, want exit status 2", tc.name, tc.value, err)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.name) {
			t.Errorf("%s=%s: stderr %q, want one line naming the variable", tc.name, tc.value, stderr.String())
		}
	}
}

// process is a running observer process; done is closed once it exited,
// with its result in err.
type process struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error
}

func start(t *testing.T, bin, natsURL, dir string) *process {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "HTTP_ADDR=127.0.0.1:0", "OBSERVER_DATA="+dir, "OBSERVER_LEADER_TIMEOUT=1h")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &process{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		// Find the listen address in the log, then drain the rest.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				HTTP string `json:"http"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "observer running" {
				addr <- line.HTTP
				break
			}
		}
		io.Copy(io.Discard, stderr)
		o.err = cmd.Wait()
		close(o.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-o.done
	})
	select {
	case o.addr = <-addr:
	case <-o.done:
		t.Fatalf("observer exited: %v", o.err)
	case <-time.After(waitTimeout):
		t.Fatal("observer did not start")
	}
	// Healthy means the stream exists and the consumer reads it.
	batontest.CheckFor(t, waitTimeout, func() error {
		resp, err := http.Get("http://" + o.addr + "/healthz")
		if err != nil {
			return fmt.Errorf("observer not healthy: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("observer not healthy: %s", resp.Status)
		}
		return nil
	})
	return o
}

// terms polls the history of cluster "default" until it has n leaderships
// (or more) and returns their terms.
func (o *process) terms(t *testing.T, n int) []uint64 {
	t.Helper()
	var terms []uint64
	batontest.CheckFor(t, waitTimeout, func() error {
		var hist []struct {
			Term uint64 `json:"term"`
		}
		if resp, err := http.Get("http://" + o.addr + "/api/clusters/default/history"); err == nil {
			json.NewDecoder(resp.Body).Decode(&hist)
			resp.Body.Close()
		}
		if len(hist) < n {
			return fmt.Errorf("history has %d leaderships, want %d", len(hist), n)
		}
		terms = terms[:0]
		for _, h := range hist {
			terms = append(terms, h.Term)
		}
		return nil
	})
	return terms
}

// Kill -9 the observer, change leaders twice, restart it: both changes
// are recorded, once each. SIGTERM then stops it with status 0.
func TestKillAndRestart(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	announce := func(leader, term uint64) {
		b, _ := protocol.EncodeAnnouncement(protocol.Announcement{Cluster: "default", Leader: leader, Term: term, Algorithm: protocol.Ring, At: protocol.Timestamp{Time: time.Now()}})
		nc.Publish(protocol.LeaderSubject("default"), b)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()

	o := start(t, bin, url, dir)
	announce(3, 1)
	o.terms(t, 1)
	o.cmd.Process.Signal(syscall.SIGKILL)
	<-o.done

	announce(4, 2)
	announce(5, 3)
	o = start(t, bin, url, dir)
	if got := o.terms(t, 3); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("history after kill -9 and restart = terms %v, want [1 2 3]", got)
	}

	o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
		if o.err != nil {
			t.Errorf("after SIGTERM: %v, want exit status 0", o.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("observer still running 5 s after SIGTERM")
	}
}
