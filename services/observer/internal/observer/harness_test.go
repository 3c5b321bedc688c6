package observer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/protocol"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 10 * time.Second

func testLogger() *slog.Logger {
	if os.Getenv("OBSERVER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// testConfig is a configuration for url and dir whose failure-detection
// window and member time-out are long enough that no leader and no member
// goes silent during a test.
func testConfig(url, dir string) Config {
	return Config{
		NATS: natsconn.Config{URL: url}, HTTPAddr: "127.0.0.1:0", DataDir: dir,
		Stream: "ELECTION_LEADERS", StreamReplicas: 1, Consumer: "observer",
		LeaderTimeout: time.Hour, SplitGrace: 100 * time.Millisecond,
		MemberTimeout: time.Hour, MaxStreams: 256, MaxClusters: 20000,
	}
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// running is an observer started by a test.
type running struct {
	*Observer
	changes *subscriber
	stop    func()
}

// startObserver runs an observer until the test ends or stop is called.
// clock may be nil for the real one; opts change the observer before it
// runs.
func startObserver(t *testing.T, cfg Config, clock *fakeClock, opts ...func(*Observer)) *running {
	t.Helper()
	o := New(cfg, testLogger())
	if clock != nil {
		o.now = clock.Now
	}
	for _, opt := range opts {
		opt(o)
	}
	r := &running{Observer: o, changes: o.hub.subscribe()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	select {
	case <-o.Listening():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	r.waitFor(t, "consuming the stream", func() bool { return o.consuming.Load() && o.connectedAt.Load() != 0 })
	return r
}

// waitFor waits until cond holds, checking it after every recorded change
// and, for conditions on NATS state, every few milliseconds.
func (r *running) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-r.changes.signal:
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// leaderships returns how many leaderships cluster has recorded.
func (r *running) leaderships(cluster string) int {
	c, ok := r.store.Cluster(cluster)
	if !ok {
		return 0
	}
	return len(c.Leaderships)
}

// get fetches path from the observer's API and decodes the JSON answer.
func (r *running) get(t *testing.T, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return resp.StatusCode
}

var t0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

func announcement(cluster string, leader, term uint64, at time.Time) protocol.Announcement {
	return protocol.Announcement{Cluster: cluster, Leader: leader, Term: term, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: at}}
}

func announce(t *testing.T, nc *nats.Conn, a protocol.Announcement) {
	t.Helper()
	b, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(protocol.LeaderSubject(a.Cluster), b); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// broadcast publishes a heartbeat or resign of node from with term.
func broadcast(t *testing.T, nc *nats.Conn, cluster string, typ protocol.Type, from, term uint64) {
	t.Helper()
	m := protocol.Message{Type: typ, From: from, Term: term}
	b, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(protocol.SubjectFor(cluster, m), b); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (l leadershipJSON) String() string {
	return fmt.Sprintf("{term %d leader %d %s %s}", l.Term, l.Leader, l.Algorithm, l.StartedAt.Format(time.RFC3339Nano))
}
