package raftbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// peerBinary is raftpeer, built once by TestMain.
var peerBinary string

// fakeMode, when set in the environment, makes the test binary act as a
// misbehaving peer instead of running tests.
const fakeMode = "RAFTBENCH_FAKE_PEER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeMode); mode != "" {
		os.Exit(fakePeer(mode))
	}
	dir, err := os.MkdirTemp("", "raftbench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	peerBinary = filepath.Join(dir, "raftpeer")
	// raftpeer is in the module bench/, which holds hashicorp/raft apart
	// from this module; it is built there, with that module's versions.
	build := exec.Command("go", "build", "-C", filepath.Join("..", "..", "..", "bench"), "-o", peerBinary, "./raftpeer")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build raftpeer:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fakePeer behaves as mode says: "self" names itself leader and waits for
// SIGTERM, "exit" fails after ready, "garbage" prints an unknown line.
func fakePeer(mode string) int {
	id := ""
	for i, a := range os.Args {
		if a == "-id" && i+1 < len(os.Args) {
			id = os.Args[i+1]
		}
	}
	now := func() int64 { return time.Now().UnixNano() }
	fmt.Printf("ready %d\n", now())
	switch mode {
	case "self":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Printf("leader %s %d\n", id, now())
		<-sigs
		return 0
	case "exit":
		fmt.Fprintln(os.Stderr, "fake peer gives up")
		return 3
	default:
		fmt.Println("hello")
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		<-sigs
		return 0
	}
}

// running lists the processes whose command line holds marker.
func running(t *testing.T, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), marker) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

func TestMeasureCrash(t *testing.T) {
	var log strings.Builder
	res, err := MeasureCrash(t.Context(), Config{
		Binary: peerBinary, N: 3, Timeouts: Timeouts150ms, Rounds: 1, Log: &log,
	})
	if err != nil {
		t.Fatalf("MeasureCrash: %v", err)
	}
	if left := running(t, peerBinary); len(left) > 0 {
		t.Errorf("processes left running: %q", left)
	}
	if len(res.Rounds) != 1 {
		t.Fatalf("rounds: got %d, want 1", len(res.Rounds))
	}
	r := res.Rounds[0]
	ids := map[string]bool{"p1": true, "p2": true, "p3": true}
	if !ids[r.Killed] || !ids[r.Elected] || r.Killed == r.Elected {
		t.Errorf("round: got killed %q, elected %q; want two different peers of p1..p3", r.Killed, r.Elected)
	}
	if r.Failover <= 0 {
		t.Errorf("failover: got %s, want > 0", r.Failover)
	}
	if res.P50 != r.Failover || res.P90 != r.Failover || res.P99 != r.Failover || res.Max != r.Failover {
		t.Errorf("quantiles of one round: got %s %s %s %s, want %s each", res.P50, res.P90, res.P99, res.Max, r.Failover)
	}
	if res.N != 3 || res.Timeouts != Timeouts150ms {
		t.Errorf("result: got N %d, Timeouts %q; want 3, %q", res.N, res.Timeouts, Timeouts150ms)
	}
	if !strings.Contains(log.String(), "round 1: killed "+r.Killed) {
		t.Errorf("log: got %q, want a line for round 1", log.String())
	}
}

// cancelOnWrite cancels a context at the first line logged.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (c cancelOnWrite) Write(p []byte) (int, error) { c.cancel(); return len(p), nil }

func TestMeasureCrashStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := MeasureCrash(ctx, Config{
		Binary: peerBinary, N: 3, Timeouts: Timeouts150ms, Rounds: 5, Log: cancelOnWrite{cancel},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("MeasureCrash: got %v, want context.Canceled", err)
	}
	if left := running(t, peerBinary); len(left) > 0 {
		t.Errorf("processes left running: %q", left)
	}
}

func TestMeasureCrashReportsMisbehaviour(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want error
		says []string
	}{
		{"self", ErrNoAgree, []string{"start-up", "p1 names p1", "p2 names p2", "p3 names p3"}},
		{"exit", ErrPeerExit, []string{"exit status 3", "fake peer gives up"}},
		{"garbage", ErrPeerLine, []string{`"hello"`}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv(fakeMode, tc.mode)
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			_, err = MeasureCrash(t.Context(), Config{
				Binary: self, N: 3, Timeouts: Timeouts150ms, Rounds: 1, Wait: time.Second,
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("MeasureCrash: got %v, want %v", err, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			t.Logf("error: %v", err)
			if left := running(t, self+" -id "); len(left) > 0 {
				t.Errorf("processes left running: %q", left)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	good := Config{Binary: peerBinary, N: 3, Timeouts: Timeouts150ms, Rounds: 1}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no binary", func(c *Config) { c.Binary = "" }},
		{"missing binary", func(c *Config) { c.Binary = filepath.Join(t.TempDir(), "none") }},
		{"two peers", func(c *Config) { c.N = 2 }},
		{"too many peers", func(c *Config) { c.N = MaxPeers + 1 }},
		{"timeouts", func(c *Config) { c.Timeouts = "1s" }},
		{"no rounds", func(c *Config) { c.Rounds = 0 }},
		{"too many rounds", func(c *Config) { c.Rounds = MaxRounds + 1 }},
		{"negative wait", func(c *Config) { c.Wait = -time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			if _, err := MeasureCrash(t.Context(), cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("got %v, want ErrConfig", err)
			}
		})
	}
}

func TestParseLine(t *testing.T) {
	proc := &process{started: time.Now()}
	now := time.Now().UnixNano()
	for _, tc := range []struct {
		line string
		kind eventKind
		who  string
	}{
		{fmt.Sprintf("ready %d", now), evReady, ""},
		{fmt.Sprintf("leader p2 %d", now), evLeader, "p2"},
		{fmt.Sprintf("leader - %d", now), evLeader, "-"},
		{"ready", evBadLine, ""},
		{fmt.Sprintf("leader %d", now), evBadLine, ""},
		{"leader p2 soon", evBadLine, ""},
		{"leader p2 99999999999999999999", evBadLine, ""},
		{"leader p2 1", evBadLine, ""}, // 1970
		{fmt.Sprintf("leader p2 %d", now+int64(time.Hour)), evBadLine, ""},
		{fmt.Sprintf("follower %d", now), evBadLine, ""},
	} {
		ev := parseLine(proc, tc.line)
		if ev.kind != tc.kind || ev.leader != tc.who {
			t.Errorf("%q: got kind %d leader %q, want %d %q", tc.line, ev.kind, ev.leader, tc.kind, tc.who)
		}
	}
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile %v: got %d, want %d", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of none: got %d, want 0", got)
	}
}
