package observer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

func TestHistoryMatchesAnnouncementsInOrder(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	// No heartbeats here: a silence window longer than a busy machine can
	// take to record the four announcements, so that none ends silent.
	cfg := testConfig(url, t.TempDir())
	cfg.LeaderTimeout = 10 * time.Second
	o := startObserver(t, cfg, nil)

	want := []protocol.Announcement{
		announcement("default", 3, 1, t0),
		announcement("default", 5, 2, t0.Add(time.Second)),
		announcement("default", 4, 7, t0.Add(2*time.Second)),
		announcement("default", 5, 9, t0.Add(3*time.Second)),
	}
	want[2].Algorithm = protocol.Ring
	for _, a := range want {
		announce(t, nc, a)
	}
	announce(t, nc, announcement("other", 1, 1, t0))
	o.waitFor(t, "four leaderships", func() bool { return o.leaderships("default") == len(want) })
	o.waitFor(t, "the other cluster's leadership", func() bool { return o.leaderships("other") == 1 })

	var got []leadershipJSON
	if code := o.get(t, "/api/clusters/default/history", &got); code != http.StatusOK {
		t.Fatalf("history: status %d, want 200", code)
	}
	if len(got) != len(want) {
		t.Fatalf("history = %v, want %d leaderships", got, len(want))
	}
	for i, a := range want {
		g := got[i]
		if g.Term != a.Term || g.Leader != a.Leader || g.Algorithm != a.Algorithm || !g.StartedAt.Equal(a.At.Time) {
			t.Errorf("history[%d] = %v, want %v", i, g, a)
		}
		if i+1 < len(want) {
			// Each leadership ends when the next starts: the observer
			// either heard the leader until then or did not see it end.
			if g.EndedAt == nil || !g.EndedAt.Equal(want[i+1].At.Time) {
				t.Errorf("history[%d].ended_at = %v, want %v", i, g.EndedAt, want[i+1].At)
			}
		} else if g.EndedAt != nil {
			t.Errorf("current leadership ended_at = %v, want null", g.EndedAt)
		}
	}

	var names []string
	o.get(t, "/api/clusters", &names)
	if strings.Join(names, ",") != "default,other" {
		t.Errorf("clusters = %v, want [default other]", names)
	}
	var cur leadershipJSON
	if code := o.get(t, "/api/clusters/default/leader", &cur); code != http.StatusOK || cur.Term != 9 || cur.Leader != 5 {
		t.Errorf("leader = %d %v, want 200 term 9 leader 5", code, cur)
	}

	// Paging: two at a time forwards, and the last two.
	var page []leadershipJSON
	o.get(t, "/api/clusters/default/history?limit=2&after_term=1", &page)
	if len(page) != 2 || page[0].Term != 2 || page[1].Term != 7 {
		t.Errorf("page after term 1 = %v, want terms 2, 7", page)
	}
	o.get(t, "/api/clusters/default/history?last=2", &page)
	if len(page) != 2 || page[0].Term != 7 || page[1].Term != 9 {
		t.Errorf("last 2 = %v, want terms 7, 9", page)
	}
	o.get(t, "/api/clusters/default/history?since=2026-11-21T22:00:01.5Z&until=2026-11-21T22:00:02.5Z", &page)
	if len(page) != 2 || page[0].Term != 2 || page[1].Term != 7 {
		t.Errorf("time range = %v, want terms 2, 7", page)
	}
}

func TestErrors(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	o := startObserver(t, testConfig(url, t.TempDir()), nil)
	announce(t, nc, announcement("default", 3, 1, t0))
	o.waitFor(t, "a leadership", func() bool { return o.leaderships("default") == 1 })

	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/clusters/nope/history", 404, `unknown cluster "nope"`},
		{"/api/clusters/nope/leader", 404, `unknown cluster "nope"`},
		{"/api/clusters/nope/gaps", 404, `unknown cluster "nope"`},
		{"/api/clusters/no.pe/history", 400, "invalid cluster name"},
		{"/api/clusters/default/history?limit=0", 400, "limit"},
		{"/api/clusters/default/history?limit=2&last=2", 400, "either limit or last"},
		{"/api/clusters/default/history?since=yesterday", 400, "since"},
		{"/api/clusters/default/history?after_term=-1", 400, "after_term"},
		{"/api/clusters/default/history?page=2", 400, `unknown query parameter "page"`},
		{"/api/nothing", 404, "no such endpoint"},
		{"/api/clusters/" + strings.Repeat("x", 1<<16) + "/history", 400, "at most 64 bytes"},
	} {
		var e errorJSON
		code := o.get(t, tc.path, &e)
		if code != tc.code || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %.80s = %d %.200q, want %d containing %q", tc.path, code, e.Error, tc.code, tc.want)
		}
		if len(e.Error) > 300 {
			t.Errorf("GET %.80s: the error echoes %d bytes", tc.path, len(e.Error))
		}
	}

	// Other methods: 405 with Allow where GET serves the path, 404 where
	// nothing does, both as JSON.
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, "/api/clusters", 405},
		{http.MethodDelete, "/api/clusters/default/history", 405},
		{http.MethodPut, "/api/clusters/default/split-brain", 405},
		{http.MethodPost, "/api/nothing", 404},
	} {
		req, err := http.NewRequest(tc.method, "http://"+o.Addr()+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e errorJSON
		decodeErr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.code || decodeErr != nil || e.Error == "" {
			t.Errorf("%s %s = %d (JSON error %q, %v), want %d", tc.method, tc.path, resp.StatusCode, e.Error, decodeErr, tc.code)
		}
		if allow := resp.Header.Get("Allow"); tc.code == 405 && allow != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q, want GET, HEAD", tc.method, tc.path, allow)
		}
	}
}

// A leader change made while the observer is down is recorded when it
// comes back, once, even when the observer had written a record but died
// before acknowledging its message.
func TestChangesWhileDownAreRecordedOnce(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	dir := t.TempDir()
	cfg := testConfig(url, dir)

	o := startObserver(t, cfg, nil)
	announce(t, nc, announcement("default", 3, 1, t0))
	o.waitFor(t, "term 1", func() bool { return o.leaderships("default") == 1 })
	o.stop()

	announce(t, nc, announcement("default", 4, 2, t0.Add(time.Second)))
	announce(t, nc, announcement("default", 5, 3, t0.Add(2*time.Second)))
	// Term 2 was persisted, but the observer died before the ack: its
	// message is still pending in the consumer and will be redelivered.
	s, err := history.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply("default",
		history.Record{Kind: history.KindEnd, Term: 1, At: protocol.Timestamp{Time: t0.Add(time.Second)}, Reason: string(history.EndUnobserved)},
		history.Record{Kind: history.KindLeader, Term: 2, Leader: 4, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: t0.Add(time.Second)}},
	); err != nil {
		t.Fatal(err)
	}
	s.Close()

	o = startObserver(t, cfg, nil)
	o.waitFor(t, "term 3", func() bool { return o.leaderships("default") == 3 })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	o.waitFor(t, "every announcement acknowledged", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, cfg.Stream, cfg.Consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	var got []leadershipJSON
	o.get(t, "/api/clusters/default/history", &got)
	if len(got) != 3 || got[0].Term != 1 || got[1].Term != 2 || got[2].Term != 3 {
		t.Fatalf("history = %v, want terms 1, 2, 3 once each", got)
	}
	if got[0].EndReason == nil || *got[0].EndReason != history.EndUnobserved {
		t.Errorf("term 1 end reason = %v, want unobserved (it ended while the observer was down)", got[0].EndReason)
	}
	if n := counter(o.metrics.announcements.WithLabelValues("duplicate")); n != 1 {
		t.Errorf("duplicate announcements = %v, want 1 (the redelivered term 2)", n)
	}
}

// startWithFakeClock runs an observer whose clock the test moves, on a
// NATS server of its own, and returns a connection to that server. The
// failure-detection window (an hour) never ends a leadership by itself.
func startWithFakeClock(t *testing.T) (*nats.Conn, *fakeClock, *running) {
	t.Helper()
	url := batontest.StartNATS(t, batontest.WithJetStream())
	clock := &fakeClock{now: t0}
	return batontest.Connect(t, url), clock, startObserver(t, testConfig(url, t.TempDir()), clock)
}

// Gaps come from what the nodes publish: here the old leader's resign.
// Split brain: two nodes with one term, and a superseded leader that keeps
// sending heartbeats after the grace.
func TestGapsAndSplitBrain(t *testing.T) {
	nc, clock, o := startWithFakeClock(t)
	c := "default"

	announce(t, nc, announcement(c, 1, 1, t0))
	o.waitFor(t, "term 1", func() bool { return o.leaderships(c) == 1 })
	broadcast(t, nc, c, protocol.TypeHeartbeat, 1, 1)
	clock.Set(t0.Add(time.Second))
	broadcast(t, nc, c, protocol.TypeResign, 1, 1)
	o.waitFor(t, "term 1 to end", func() bool { l, _ := o.store.Latest(c); return l.Ended() })
	var e errorJSON
	if code := o.get(t, "/api/clusters/"+c+"/leader", &e); code != http.StatusNotFound {
		t.Errorf("leader after resign: status %d, want 404", code)
	}

	clock.Set(t0.Add(1500 * time.Millisecond))
	announce(t, nc, announcement(c, 2, 2, t0.Add(1500*time.Millisecond)))
	o.waitFor(t, "term 2", func() bool { return o.leaderships(c) == 2 && o.liveCount("leader") == 2 })

	// Node 3 announces term 4 while node 2 still leads: a takeover.
	// Node 2's heartbeat within the grace is its last in flight; the one
	// after the grace is split brain.
	announce(t, nc, announcement(c, 3, 4, t0.Add(2*time.Second)))
	o.waitFor(t, "term 4", func() bool { return o.leaderships(c) == 3 && o.liveCount("leader") == 3 })
	clock.Set(t0.Add(1550 * time.Millisecond))
	broadcast(t, nc, c, protocol.TypeHeartbeat, 2, 2)
	o.waitFor(t, "the heartbeat in flight", func() bool { return o.liveCount("heartbeat") == 2 })
	if cl, _ := o.store.Cluster(c); len(cl.SplitBrains) != 0 {
		t.Errorf("split brain on a heartbeat within the grace: %+v", cl.SplitBrains)
	}
	clock.Set(t0.Add(1700 * time.Millisecond))
	broadcast(t, nc, c, protocol.TypeHeartbeat, 2, 2)
	o.waitFor(t, "a split brain", func() bool { cl, _ := o.store.Cluster(c); return len(cl.SplitBrains) == 1 })

	// Node 3 is heard just before it is superseded: no gap before term 6.
	broadcast(t, nc, c, protocol.TypeHeartbeat, 3, 4)
	o.waitFor(t, "3's heartbeat", func() bool { return o.liveCount("heartbeat") == 4 })

	// Two nodes announcing one term: split brain at once, one leadership.
	announce(t, nc, announcement(c, 4, 6, t0.Add(3*time.Second)))
	announce(t, nc, announcement(c, 5, 6, t0.Add(3*time.Second)))
	o.waitFor(t, "the second split brain", func() bool { cl, _ := o.store.Cluster(c); return len(cl.SplitBrains) == 2 })
	o.waitFor(t, "term 6", func() bool { return o.leaderships(c) == 4 })

	var hist []leadershipJSON
	o.get(t, "/api/clusters/"+c+"/history", &hist)
	if len(hist) != 4 {
		t.Fatalf("history = %v, want terms 1, 2, 4, 6", hist)
	}
	if g := hist[1].GapBeforeSeconds; g == nil || *g != 0.5 {
		t.Errorf("gap before term 2 = %v, want 0.5 s (resign to announcement)", g)
	}
	if r := hist[0].EndReason; r == nil || *r != history.EndResign {
		t.Errorf("term 1 ended by %v, want resign", r)
	}
	for i, want := range []bool{false, true, true, true} {
		if hist[i].SplitBrain != want {
			t.Errorf("term %d split_brain = %v, want %v", hist[i].Term, hist[i].SplitBrain, want)
		}
	}
	var splits []splitBrainJSON
	o.get(t, "/api/clusters/"+c+"/split-brain", &splits)
	if len(splits) != 2 || splits[0].Reason != history.SplitStaleLeader || splits[1].Reason != history.SplitSameTerm {
		t.Errorf("split brains = %+v, want stale_leader then same_term", splits)
	}
	// The lists take the history's paging and filters.
	o.get(t, "/api/clusters/"+c+"/split-brain?limit=1", &splits)
	if len(splits) != 1 || splits[0].Reason != history.SplitStaleLeader {
		t.Errorf("first split brain = %+v, want the stale_leader one", splits)
	}
	o.get(t, "/api/clusters/"+c+"/split-brain?last=1", &splits)
	if len(splits) != 1 || splits[0].Reason != history.SplitSameTerm {
		t.Errorf("last split brain = %+v, want the same_term one", splits)
	}
	var gaps []gapJSON
	o.get(t, "/api/clusters/"+c+"/gaps", &gaps)
	if len(gaps) != 1 || gaps[0].AfterTerm != 1 || gaps[0].Seconds != 0.5 {
		t.Errorf("gaps = %+v, want one of 0.5 s after term 1", gaps)
	}
	o.get(t, "/api/clusters/"+c+"/gaps?after_term=1", &gaps)
	if len(gaps) != 0 {
		t.Errorf("gaps after term 1 = %+v, want none", gaps)
	}
	var gapErr errorJSON
	if code := o.get(t, "/api/clusters/"+c+"/gaps?limit=0", &gapErr); code != http.StatusBadRequest {
		t.Errorf("gaps?limit=0: status %d, want 400", code)
	}

	metrics := scrape(t, o)
	for _, want := range []string{
		// Term 2 after a gap of 0.5 s; terms 4 and 6 took over at once.
		`observer_leaderless_gap_seconds_count{cluster="default"} 3`,
		`observer_leaderless_gap_seconds_sum{cluster="default"} 0.5`,
		`observer_split_brain_events_total{cluster="default",reason="same_term"} 1`,
		`observer_split_brain_events_total{cluster="default",reason="stale_leader"} 1`,
		`observer_leader_changes_total{cluster="default"} 4`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// liveCount is how many valid live messages of kind the owner goroutine
// has taken in; each was stamped with the clock on arrival, before.
func (r *running) liveCount(kind string) float64 {
	return counter(r.metrics.live.WithLabelValues(kind, "ok"))
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

func scrape(t *testing.T, o *running) string {
	t.Helper()
	resp, err := http.Get("http://" + o.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A leader still within the failure-detection window but silent for longer
// than the grace when its successor is announced had stopped: it ends at
// its last heartbeat, and the gap runs from there. One heard within the
// grace was superseded while working: no gap.
func TestSilentLeaderBeforeItsSuccessor(t *testing.T) {
	nc, clock, o := startWithFakeClock(t)
	c := "default"

	announce(t, nc, announcement(c, 5, 5, t0))
	o.waitFor(t, "term 5", func() bool { return o.leaderships(c) == 1 && o.liveCount("leader") == 1 })
	broadcast(t, nc, c, protocol.TypeHeartbeat, 5, 5)
	o.waitFor(t, "5's heartbeat", func() bool { return o.liveCount("heartbeat") == 1 })

	// 5 stops; 150 ms later (more than the 100 ms grace) 4 takes over.
	clock.Set(t0.Add(150 * time.Millisecond))
	announce(t, nc, announcement(c, 4, 9, t0.Add(150*time.Millisecond)))
	o.waitFor(t, "term 9", func() bool { return o.leaderships(c) == 2 && o.liveCount("leader") == 2 })

	// 4 heartbeats; 50 ms later 5 is back and takes over.
	clock.Set(t0.Add(200 * time.Millisecond))
	broadcast(t, nc, c, protocol.TypeHeartbeat, 4, 9)
	o.waitFor(t, "4's heartbeat", func() bool { return o.liveCount("heartbeat") == 2 })
	clock.Set(t0.Add(250 * time.Millisecond))
	announce(t, nc, announcement(c, 5, 10, t0.Add(250*time.Millisecond)))
	o.waitFor(t, "term 10", func() bool { return o.leaderships(c) == 3 && o.liveCount("leader") == 3 })

	var hist []leadershipJSON
	o.get(t, "/api/clusters/"+c+"/history", &hist)
	if len(hist) != 3 {
		t.Fatalf("history = %v, want terms 5, 9, 10", hist)
	}
	if r := hist[0].EndReason; r == nil || *r != history.EndSilent || hist[0].EndedAt == nil || !hist[0].EndedAt.Equal(t0) {
		t.Errorf("term 5 ended %v at %v, want silent at its heartbeat %v", r, hist[0].EndedAt, t0)
	}
	if g := hist[1].GapBeforeSeconds; g == nil || *g != 0.15 {
		t.Errorf("gap before term 9 = %v, want 0.15 s", g)
	}
	if r := hist[1].EndReason; r == nil || *r != history.EndSuperseded {
		t.Errorf("term 9 ended %v, want superseded", r)
	}
	if g := hist[2].GapBeforeSeconds; g == nil || *g != 0 {
		t.Errorf("gap before term 10 = %v, want 0", g)
	}
}

// Every documented series exists from the start at zero (the live
// counters), and every per-cluster series from the first announcement of
// the cluster, so that increase() alerts see zero rather than nothing.
func TestMetricSeriesExistAtZero(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	o := startObserver(t, testConfig(url, t.TempDir()), nil)
	before := scrape(t, o)
	for _, want := range []string{
		`observer_live_messages_total{kind="heartbeat",result="bad_signature"} 0`,
		`observer_live_messages_total{kind="query",result="dropped"} 0`,
		`observer_announcements_total{result="invalid"} 0`,
	} {
		if !strings.Contains(before, want) {
			t.Errorf("metrics at start lack %s", want)
		}
	}
	announce(t, nc, announcement("fresh", 3, 1, t0))
	// The metrics follow the record: wait for the change to be counted.
	o.waitFor(t, "the leadership counted", func() bool {
		return strings.Contains(scrape(t, o), `observer_leader_changes_total{cluster="fresh"} 1`)
	})
	after := scrape(t, o)
	for _, want := range []string{
		`observer_split_brain_events_total{cluster="fresh",reason="same_term"} 0`,
		`observer_split_brain_events_total{cluster="fresh",reason="stale_leader"} 0`,
		`observer_leaderless_seconds_total{cluster="fresh"} 0`,
		`observer_leaderless_gap_seconds_count{cluster="fresh"} 0`,
	} {
		if !strings.Contains(after, want) {
			t.Errorf("metrics after the cluster's first announcement lack %s", want)
		}
	}

	// Every metric of docs/observer-api.md, with every label value it
	// lists: the ones without a cluster from the start, the others from
	// the cluster's first record.
	documented := documentedMetrics(t)
	if len(documented) < 10 {
		t.Fatalf("found %d metrics in the documentation, want the whole table", len(documented))
	}
	for _, m := range documented {
		text := before
		if _, perCluster := m.labels["cluster"]; perCluster {
			text = after
		}
		if slices.Contains(kindSeries, m.name) {
			continue // from the first record of their kind: TestMetricSeriesOfKinds
		}
		if !hasSeries(text, m.name, "", "") {
			t.Errorf("metrics lack the documented %s", m.name)
		}
		for label, values := range m.labels {
			for _, v := range values {
				if !hasSeries(text, m.name, label, v) {
					t.Errorf("metrics lack the documented %s{%s=%q}", m.name, label, v)
				}
			}
		}
	}
}

// documentedMetric is a row of the metrics table of docs/observer-api.md:
// a name and its labels, each with the values the row lists.
type documentedMetric struct {
	name   string
	labels map[string][]string
}

func documentedMetrics(t *testing.T) []documentedMetric {
	t.Helper()
	doc, err := os.ReadFile("../../../../docs/observer-api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(observer_[a-z_]+)` \\| [a-z]+ \\| ([^|]*) \\|")
	label := regexp.MustCompile("`([a-z_]+)`(?: \\(([^)]*)\\))?")
	var out []documentedMetric
	for line := range strings.Lines(string(doc)) {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		dm := documentedMetric{name: m[1], labels: map[string][]string{}}
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			var values []string
			for _, v := range strings.Split(l[2], ",") {
				if v = strings.Trim(strings.TrimSpace(v), "`"); v != "" {
					values = append(values, v)
				}
			}
			dm.labels[l[1]] = values
		}
		out = append(out, dm)
	}
	return out
}

// hasSeries reports whether the scrape text has a series of metric name
// (a histogram's _count for one), with label=value if label is set.
func hasSeries(text, name, label, value string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, _, _ := strings.Cut(line, " ")
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name && metric != name+"_count" {
			continue
		}
		if label == "" || strings.Contains(labels, label+"=\""+value+"\"") {
			return true
		}
	}
	return false
}

// kindSeries are the per-cluster series created from the cluster's first
// record of their kind (metrics.kinds), not from its first record.
var kindSeries = []string{"observer_history_compacted_total", "observer_history_records_dropped_total", "observer_evidence_recorded_total",
	"observer_cluster_members", "observer_membership_changes_total"}

// The series of what only some clusters see exist, at zero, from the
// cluster's first record of their kind; a cluster that sees none of it
// has none of them.
func TestMetricSeriesOfKinds(t *testing.T) {
	m := newMetrics()
	has := func(name string, labels ...string) bool {
		families, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
		series:
			for _, s := range f.GetMetric() {
				for i := 0; i+1 < len(labels); i += 2 {
					if !slices.ContainsFunc(s.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
						continue series
					}
				}
				return true
			}
		}
		return false
	}
	c := &history.Cluster{Leaderships: []history.Leadership{{Term: 1, Leader: 3, StartedAt: t0}}}
	m.state("plain", c)
	if !has("observer_leader_changes_total", "cluster", "plain") || !has("observer_flaps_total", "cluster", "plain") {
		t.Error("a cluster's first record creates no series")
	}
	for _, name := range kindSeries {
		if has(name, "cluster", "plain") {
			t.Errorf("a cluster with one leadership has %s", name)
		}
	}
	c.SplitBrains = []history.SplitBrain{{At: t0, Reason: history.SplitSameTerm}}
	c.Faulty = []history.Faulty{{Member: 2, At: t0}}
	c.Membership = []history.MemberEvent{{Seq: 1, Member: 3, Event: history.MemberJoined, Reason: "presence", At: t0}}
	c.Floor = 1
	m.state("busy", c)
	for _, want := range [][]string{
		{"observer_history_records_dropped_total", "kind", "split"},
		{"observer_history_records_dropped_total", "kind", "faulty"},
		{"observer_history_records_dropped_total", "kind", "member"},
		{"observer_evidence_recorded_total"},
		{"observer_cluster_members"},
		{"observer_membership_changes_total", "event", "left", "reason", "silent"},
		{"observer_history_compacted_total"},
	} {
		if !has(want[0], append([]string{"cluster", "busy"}, want[1:]...)...) {
			t.Errorf("a cluster with records of every kind lacks %v", want)
		}
	}
}
