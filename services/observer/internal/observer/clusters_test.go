package observer

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// syncBuffer is a log destination the test reads while the observer
// writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// leaderRecord is the record of an announcement of leader in term at.
func leaderRecord(leader, term uint64, at time.Time) history.Record {
	return history.Record{Kind: history.KindLeader, Term: term, Leader: leader, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: at}}
}

// Past OBSERVER_MAX_CLUSTERS, a new cluster is refused, by the stream and
// live alike, counted per message and logged once a minute at most; the
// clusters followed stay followed, and a cluster heard live first counts
// as one until it has a history.
func TestMaxClustersRefusesOneMore(t *testing.T) {
	clock := &fakeClock{now: t0}
	a := newAPI(t, clock)
	a.cfg.MaxClusters = 3000
	var logs syncBuffer
	a.log = slog.New(slog.NewTextHandler(&logs, nil))
	// Thousands of clusters, as the stream would bring them: each one
	// admitted, then recorded.
	for i := range 3000 {
		name := fmt.Sprintf("shard-%d", i)
		if i == 2999 {
			// The last one is heard live first: followed before it has
			// a history.
			if !a.admit(name, sourceLive) {
				t.Fatalf("cluster %d of 3000 refused live", i)
			}
		}
		if !a.admit(name, sourceStream) {
			t.Fatalf("cluster %d of 3000 refused", i)
		}
		a.apply(t, name, leaderRecord(uint64(i%5+1), 1, t0))
	}
	// shard-2999, heard live first, has a history now: it counts once.
	a.admit("shard-2999", sourceLive)
	if n := a.clustersFollowed(); n != 3000 || len(a.followed.liveOnly) != 0 {
		t.Fatalf("clusters followed = %d, %d only live; want 3000, 0", n, len(a.followed.liveOnly))
	}
	for _, source := range []string{sourceStream, sourceLive, sourceLive} {
		if a.admit("shard-3000", source) {
			t.Fatalf("cluster 3001 admitted (%s) with OBSERVER_MAX_CLUSTERS=3000", source)
		}
	}
	if a.admit("other", sourceLive) {
		t.Fatal("another cluster admitted live past the bound")
	}
	// Those followed still are.
	for _, name := range []string{"shard-0", "shard-2999"} {
		if !a.admit(name, sourceStream) || !a.admit(name, sourceLive) {
			t.Errorf("%s, followed, refused", name)
		}
	}
	if got := counter(a.metrics.clustersRefused.WithLabelValues(sourceStream)); got != 1 {
		t.Errorf("observer_clusters_refused_total{source=stream} = %v, want 1", got)
	}
	if got := counter(a.metrics.clustersRefused.WithLabelValues(sourceLive)); got != 3 {
		t.Errorf("observer_clusters_refused_total{source=live} = %v, want 3", got)
	}
	if n := strings.Count(logs.String(), "refusing a cluster"); n != 1 {
		t.Errorf("logged %d warnings for 4 refusals within a minute, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "cluster=shard-3000") || !strings.Contains(logs.String(), "max_clusters=3000") {
		t.Errorf("the warning does not name the cluster and the bound:\n%s", logs.String())
	}
	clock.Set(t0.Add(refusedLogEvery))
	a.admit("shard-3001", sourceStream)
	if n := strings.Count(logs.String(), "refusing a cluster"); n != 2 || !strings.Contains(logs.String(), "refused_messages=4") {
		t.Errorf("a minute later: %d warnings, want a second one counting the 4 refusals since the first:\n%s", n, logs.String())
	}
	// The gauges say how many are followed, and the bound.
	body := a.get(t, "/metrics")
	for _, want := range []string{"observer_clusters 3000\n", "observer_clusters_max 3000\n", `observer_clusters_refused_total{source="live"} 3`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// get returns the body of GET path, which must answer 200.
func (a *api) get(t *testing.T, path string) string {
	t.Helper()
	resp, body := a.do(t, "GET", path)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %s %s", path, resp.Status, body)
	}
	return body
}

// With member keys, a cluster without keys does not take a place: its
// messages are refused for their signature and create nothing.
func TestMaxClustersIgnoresClustersWithoutKeys(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0})
	a.cfg.MaxClusters = 1
	a.cfg.Keys = map[string]*signing.MemberKeys{"keyed": nil}
	for range 3 {
		if !a.admit("stranger", sourceLive) {
			t.Fatal("a cluster without keys refused for the bound; want it left to the signature check")
		}
	}
	if !a.admit("keyed", sourceLive) {
		t.Fatal("the one cluster with keys refused")
	}
}

// Through NATS: with OBSERVER_MAX_CLUSTERS=2, the announcements of a third
// cluster are acknowledged and dropped, counted as refused, and the
// followed clusters go on being recorded.
func TestMaxClustersOverNATS(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	cfg := testConfig(url, t.TempDir())
	cfg.MaxClusters = 2
	o := startObserver(t, cfg, nil)
	announce(t, nc, announcement("a", 1, 1, t0))
	announce(t, nc, announcement("b", 1, 1, t0))
	announce(t, nc, announcement("c", 1, 1, t0))
	announce(t, nc, announcement("a", 2, 2, t0.Add(time.Second)))
	// The stream's announcements first, in order (a, b, c refused, a):
	// a live message heard before them would take b's or c's place.
	o.waitFor(t, "term 2 of a", func() bool { return o.leaderships("a") == 2 })
	broadcast(t, nc, "d", protocol.TypeHeartbeat, 1, 1)
	o.waitFor(t, "the refusals counted", func() bool {
		return counter(o.metrics.announcements.WithLabelValues(resultRefused)) == 1 &&
			counter(o.metrics.clustersRefused.WithLabelValues(sourceLive)) >= 1
	})
	var names []string
	o.get(t, "/api/clusters", &names)
	if fmt.Sprint(names) != "[a b]" {
		t.Errorf("GET /api/clusters = %v, want [a b]", names)
	}
	if got := counter(o.metrics.clustersRefused.WithLabelValues(sourceStream)); got != 1 {
		t.Errorf("observer_clusters_refused_total{source=stream} = %v, want 1", got)
	}
}

// The announcements of one batch are admitted before any is written: a
// cluster admitted and not written yet counts against the bound, once.
func TestMaxClustersCountsUnwritten(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0})
	a.cfg.MaxClusters = 2
	for _, name := range []string{"a", "b", "a"} {
		if !a.admit(name, sourceStream) {
			t.Fatalf("%s refused with %d clusters followed", name, a.clustersFollowed())
		}
	}
	if a.admit("c", sourceStream) {
		t.Fatal("a third cluster admitted while two wait to be written, with OBSERVER_MAX_CLUSTERS=2")
	}
	a.apply(t, "a", leaderRecord(1, 1, t0))
	a.apply(t, "b", leaderRecord(1, 1, t0))
	if n := a.clustersFollowed(); n != 2 {
		t.Errorf("clusters followed once written = %d, want 2", n)
	}
	if a.admit("c", sourceStream) {
		t.Error("a third cluster admitted once two are written")
	}
}
