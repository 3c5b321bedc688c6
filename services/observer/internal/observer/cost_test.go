package observer

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// cost is what one request allocates, on average.
type cost struct{ allocs, bytes float64 }

func (c cost) String() string { return fmt.Sprintf("%.0f allocations, %.0f bytes", c.allocs, c.bytes) }

// requestCost serves path n times and returns what one request allocated
// on average (as testing.AllocsPerRun counts, and in bytes).
func requestCost(h http.Handler, path string) cost {
	const n = 20
	serve := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			panic(fmt.Sprintf("GET %s = %d %s", path, w.Code, w.Body))
		}
	}
	serve()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		serve()
	}
	runtime.ReadMemStats(&after)
	return cost{float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n}
}

// historyOf returns an API over a history of cluster a of about records
// records: leaderships, each ended silent half a second after its start,
// a gap before the next, and two split brains; the latest lasts.
func historyOf(t *testing.T, records int) *api {
	t.Helper()
	n := records / 2
	a := newAPI(t, &fakeClock{now: t0.Add(time.Duration(n+1) * time.Second)})
	recs := make([]history.Record, 0, 2*n+2)
	for term := uint64(1); term <= uint64(n); term++ {
		at := t0.Add(time.Duration(term) * time.Second)
		recs = append(recs, history.Record{Kind: history.KindLeader, Term: term, Leader: term%5 + 1, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: at}})
		if term < uint64(n) {
			recs = append(recs, history.Record{Kind: history.KindEnd, Term: term, At: protocol.Timestamp{Time: at.Add(500 * time.Millisecond)}, Reason: string(history.EndSilent)})
		}
	}
	for _, term := range []uint64{uint64(n) - 1, 2} { // seen out of term order
		recs = append(recs, history.Record{Kind: history.KindSplit, At: protocol.Timestamp{Time: t0.Add(time.Duration(term) * time.Second)}, Reason: history.SplitSameTerm,
			Leaders: []history.Acting{{Leader: 1, Term: term}, {Leader: 2, Term: term}}})
	}
	a.apply(t, "a", recs...)
	return a
}

// A request reads the history in place and copies only what it answers:
// what it allocates does not grow with the history. (Each used to copy
// the whole history: 100000 records, 50000 leaderships, are about 5 MB.)
func TestRequestCostDoesNotGrowWithTheHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a history of 100000 records")
	}
	small, large := historyOf(t, 1000), historyOf(t, 100000)
	for _, path := range []string{
		"/api/clusters/a/history?last=1",
		"/api/clusters/a/history?limit=10&after_term=300",
		"/api/clusters/a/history?before_term=400&last=5",
		"/api/clusters/a/leader",
		"/api/clusters/a/gaps?last=1",
		"/api/clusters/a/split-brain?last=1",
		"/",
	} {
		s, l := requestCost(small.routes(), path), requestCost(large.routes(), path)
		// A margin of 2% and 16 allocations: the process's other
		// goroutines allocate meanwhile too (MemStats counts them), and a
		// copy of the history would cost tens of thousands.
		if l.allocs > s.allocs*1.02+16 || l.bytes > 2*s.bytes+16<<10 {
			t.Errorf("GET %s: %v with 100000 records, %v with 1000; want no growth with the history", path, l, s)
		}
	}
}
