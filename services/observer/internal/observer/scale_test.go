package observer

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/recorder"
)

// heapInUse returns the bytes of live heap after a full collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// follow feeds the observer the life of n idle clusters shard-0 …
// shard-(n-1), as the owner goroutine would: each one's announcement
// recorded (with its metrics, events and page notification), then a
// heartbeat of its leader, so that the recorder follows it live too.
func follow(t testing.TB, a *api, rec *recorder.Recorder, n int, withMetrics bool) {
	now := a.now()
	for i := range n {
		name := fmt.Sprintf("shard-%d", i)
		if !a.admit(name, sourceStream) {
			t.Fatalf("%s refused", name)
		}
		ann := announcement(name, uint64(i%5+1), 1, now)
		kept, err := a.recordAnnouncement(name, ann, rec.Announced(name, ann, now))
		if err != nil {
			t.Fatal(err)
		}
		a.wrote()
		if withMetrics {
			a.changed(name, kept)
		}
		a.write(name, rec.HeardHeartbeat(name, ann.Leader, 1, now))
	}
}

// What an idle cluster costs the observer in memory: its history (one
// leadership), the recorder's live state (its leader), and its metrics
// series. The bytes are logged (go test -run TestMemoryPerIdleCluster -v);
// the bound only catches a gross regression, such as a goroutine or a
// buffer per cluster. It follows 2000 clusters, or
// OBSERVER_SCALE_CLUSTERS (each one's file is created and synced, which
// takes a while: 10000 is a minute or two on a busy machine).
func TestMemoryPerIdleCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("follows thousands of clusters")
	}
	n := 2000
	if s := os.Getenv("OBSERVER_SCALE_CLUSTERS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("OBSERVER_SCALE_CLUSTERS=%q: want a positive number", s)
		}
		n = v
	}
	for _, withMetrics := range []bool{false, true} {
		a := newAPI(t, &fakeClock{now: t0})
		a.cfg.MaxClusters = n
		rec := recorder.New(recorder.Config{Window: time.Hour, Grace: time.Millisecond, AskAfter: time.Hour}, a.store)
		goroutines := runtime.NumGoroutine()
		before := heapInUse()
		follow(t, a, rec, n, withMetrics)
		after := heapInUse()
		per := float64(int64(after)-int64(before)) / float64(n)
		what := "history and recorder"
		if withMetrics {
			what = "history, recorder and metrics"
		}
		t.Logf("%d idle clusters: %.0f bytes each (%s), %.1f MiB in all", n, per, what, float64(int64(after)-int64(before))/(1<<20))
		if per > 64<<10 {
			t.Errorf("an idle cluster costs %.0f bytes (%s), want far less than 64 KiB", per, what)
		}
		if g := runtime.NumGoroutine(); g > goroutines+10 {
			t.Errorf("%d goroutines after following %d clusters, %d before: want none per cluster", g, n, goroutines)
		}
		if open := a.store.Count(); open != n {
			t.Errorf("%d clusters recorded, want %d", open, n)
		}
		// The silence check goes over every cluster each half window.
		const checks = 20
		start := time.Now()
		for range checks {
			if w := rec.Silence(t0.Add(time.Millisecond), t0); len(w) != 0 {
				t.Fatalf("%d clusters silent", len(w))
			}
		}
		t.Logf("the silence check over %d clusters took %v", n, time.Since(start)/checks)
		if withMetrics {
			// What the API and the page cost with that many clusters.
			for _, path := range []string{"/api/leaders?limit=500&offset=1000", "/api/leaders?q=shard-99", "/api/summary", "/", "/?q=shard-1&page=3"} {
				start := time.Now()
				const gets = 5
				for range gets {
					a.get(t, path)
				}
				t.Logf("GET %s with %d clusters took %v", path, n, time.Since(start)/gets)
			}
		}
		runtime.KeepAlive(rec)
	}
}

// How many live heartbeats the owner goroutine takes in per second, with
// a thousand clusters followed: a deployment of n elections whose leaders
// beat every 100 ms sends 10·n a second.
func BenchmarkObserveHeartbeats(b *testing.B) {
	const n = 1000
	a := newAPI(b, &fakeClock{now: t0})
	rec := recorder.New(recorder.Config{Window: time.Hour, Grace: time.Millisecond, AskAfter: time.Hour}, a.store)
	follow(b, a, rec, n, true)
	msgs := make([]liveMsg, n)
	for i := range msgs {
		cluster := fmt.Sprintf("shard-%d", i)
		m := protocol.Message{Type: protocol.TypeHeartbeat, From: uint64(i%5 + 1), Term: 1}
		data, err := protocol.Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = liveMsg{subject: protocol.SubjectFor(cluster, m), data: data, at: t0}
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		a.observe(rec, msgs[i%n])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}
