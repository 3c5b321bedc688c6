package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"go.uber.org/goleak"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// logBuffer collects a replica's log, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// replica is one replica run in-process by run.
type replica struct {
	log  *logBuffer
	stop context.CancelFunc
	code chan int
	base string // http://host:port
}

var servingRE = regexp.MustCompile(`msg="serving HTTP".* addr=(\S+)`)

// startReplica runs a replica with NODE_ID id on the NATS at url, as the
// node user, with its HTTP server on a free port of 127.0.0.1.
func startReplica(t *testing.T, url string, id uint64, extra map[string]string) *replica {
	t.Helper()
	env := map[string]string{
		"NATS_URL": url, "NATS_USER": natsconf.NodeUser, "NATS_PASSWORD": natsconf.LocalPasswords.Node,
		"NODE_ID": fmt.Sprint(id), "HTTP_ADDR": "127.0.0.1:0", "ELECTION_DATA": t.TempDir(),
		"FLEET_WORK_INTERVAL": "20ms",
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{log: &logBuffer{}, stop: cancel, code: make(chan int, 1)}
	go func() { r.code <- run(ctx, env, noHost, r.log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.code:
		case <-time.After(5 * time.Second):
			t.Errorf("replica %d did not stop", id)
		}
	})
	batontest.CheckFor(t, 10*time.Second, func() error {
		m := servingRE.FindStringSubmatch(r.log.String())
		if m == nil {
			return errors.New("replica not serving HTTP yet")
		}
		r.base = "http://" + m[1]
		return nil
	})
	return r
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Two replicas: the higher ID leads and works, the other does not; on
// SIGTERM (its context's end) the leader stops working, hands over and
// returns 0 within 2 s; the other takes over with a higher term and
// works.
func TestRunHandsOver(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithAccounts())
	nc := batontest.Connect(t, url, batontest.AsNode("watcher", 1)...)
	leaders, err := nc.SubscribeSync(protocol.LeaderSubject("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	low := startReplica(t, url, 3, nil)
	high := startReplica(t, url, 9, nil)

	var hw, lw workStatus
	batontest.CheckFor(t, 10*time.Second, func() error {
		var st protocol.Status
		if err := getJSON(low.base+"/status", &st); err != nil {
			return err
		}
		if st.Leader == nil || *st.Leader != 9 || fmt.Sprint(st.Members) != "[3 9]" {
			return fmt.Errorf("replica 3's status: %+v", st)
		}
		if err := getJSON(high.base+"/work", &hw); err != nil {
			return err
		}
		if !hw.Leading || hw.Done == 0 {
			return fmt.Errorf("replica 9's work: %+v", hw)
		}
		return nil
	})
	if err := getJSON(low.base+"/work", &lw); err != nil || lw.Leading || lw.Done != 0 {
		t.Errorf("replica 3, which follows, worked: %+v (%v)", lw, err)
	}

	start := time.Now()
	high.stop()
	select {
	case code := <-high.code:
		high.code <- code // for the cleanup
		if code != exitOK {
			t.Errorf("replica 9 exited with %d, want %d; log:\n%s", code, exitOK, high.log)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("replica 9 took %v to stop, want at most 2 s", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("replica 9 did not stop; log:\n%s", high.log)
	}
	if !strings.Contains(high.log.String(), "no longer leading") {
		t.Errorf("replica 9 did not stop working; log:\n%s", high.log)
	}

	batontest.CheckFor(t, 10*time.Second, func() error {
		if err := getJSON(low.base+"/work", &lw); err != nil {
			return err
		}
		if !lw.Leading || lw.Done == 0 || lw.Term <= hw.Term {
			return fmt.Errorf("replica 3's work: %+v (replica 9 worked under term %d)", lw, hw.Term)
		}
		return nil
	})
	// The announcements: 9's, then 3's with a higher term.
	var got []protocol.Announcement
	for {
		msg, err := leaders.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		a, err := signing.ReadAnnouncement(nil, "fleet", msg.Data, msg.Header)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	if len(got) < 2 || got[len(got)-1].Leader != 3 {
		t.Fatalf("announcements %+v, want 9's then 3's", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Term <= got[i-1].Term {
			t.Errorf("announcement %+v follows %+v: terms must increase", got[i], got[i-1])
		}
	}
}

// With ELECTION_KEEP_LEADER=true (here with the ring), a replica that
// joins with a higher ID follows the leader it finds; when that leader
// leaves, the highest ID present leads.
func TestRunKeepLeader(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithAccounts())
	extra := map[string]string{"ELECTION_ALGORITHM": "ring", "ELECTION_KEEP_LEADER": "true"}
	waitLeader := func(r *replica, leader uint64, members string) {
		t.Helper()
		batontest.CheckFor(t, 10*time.Second, func() error {
			var st protocol.Status
			if err := getJSON(r.base+"/status", &st); err != nil {
				return err
			}
			if st.Leader == nil || *st.Leader != leader || fmt.Sprint(st.Members) != members || st.Algorithm != protocol.Ring {
				return fmt.Errorf("replica %d's status: %+v, want leader %d and members %s", st.ID, st, leader, members)
			}
			return nil
		})
	}
	low := startReplica(t, url, 3, extra)
	waitLeader(low, 3, "[3]")
	high := startReplica(t, url, 9, extra)
	waitLeader(high, 3, "[3 9]")
	waitLeader(low, 3, "[3 9]")
	low.stop()
	waitLeader(high, 9, "[9]")
}

// Two replicas with one ID (two hostnames that hash alike): each hears
// the other's broadcasts under its own ID, and says so.
func TestRunCollision(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithAccounts())
	a := startReplica(t, url, 5, nil)
	b := startReplica(t, url, 5, nil)
	batontest.CheckFor(t, 10*time.Second, func() error {
		for _, r := range []*replica{a, b} {
			if !strings.Contains(r.log.String(), "two replicas share the member ID") {
				return errors.New("a replica has not noticed the other with its ID")
			}
		}
		return nil
	})
}

// The binary: a bad variable exits with status 2 and one line naming it.
func TestBinaryInvalidConfiguration(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	for _, tc := range []struct{ key, value string }{
		{"NODE_ID", "0"},
		{"ELECTION_ALGORITHM", "paxos"},
		{"FLEET_WORK_INTERVAL", "soon"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin)
		cmd.Env = []string{tc.key + "=" + tc.value, "ELECTION_DATA=" + t.TempDir()}
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitConfig {
			t.Errorf("%s=%s: %v, want exit status %d", tc.key, tc.value, err, exitConfig)
		}
		if out := stderr.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, tc.key+": ") {
			t.Errorf("%s=%s: stderr %q, want one line naming it", tc.key, tc.value, out)
		}
	}
}

// A replica that issues itself a credential connects to NATS with it, no
// user or password: a server that checks credentials admits it.
func TestSelfIssuedCredentialConnects(t *testing.T) {
	authority, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := authority.Seed()
	public, _ := authority.PublicKey()
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "authority.seed")
	if err := os.WriteFile(seedFile, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	authDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(authDir, "fleet"+natsauth.AuthoritySuffix), []byte(public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, stop, err := natsconf.StartLocalWithCallout(t.TempDir(), "127.0.0.1", -1, "", nil, t.TempDir(), authDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	r := startReplica(t, s.ClientURL(), 5, map[string]string{"NATS_USER": "", "NATS_PASSWORD": "", "FLEET_ISSUER_SEED_FILE": seedFile})
	batontest.CheckFor(t, 10*time.Second, func() error {
		var st protocol.Status
		if err := getJSON(r.base+"/status", &st); err != nil {
			return err
		}
		if st.Leader == nil || *st.Leader != 5 {
			return fmt.Errorf("status %+v, want replica 5 leading", st)
		}
		return nil
	})
	// Its own connection's events, or its probe's, reach it: the server
	// admitted it into the members' account.
	batontest.CheckFor(t, 10*time.Second, func() error {
		if !strings.Contains(r.log.String(), "connection events in effect") {
			return errors.New("connection events not in effect yet")
		}
		return nil
	})
}
