package observer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

func TestNaturalCompare(t *testing.T) {
	ordered := []string{"a", "a1", "a01", "a2", "a10", "b", "shard-0", "shard-1", "shard-2", "shard-9", "shard-10", "shard-10-a", "shard-10a", "shard-11", "shard-99", "shard-100", "shard-999", "shard-1000", "shard-9999"}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := naturalCompare(a, b); got != want {
				t.Errorf("naturalCompare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// shards is an API over a deployment of n elections shard-0 … shard-(n-1)
// whose leaders are spread over 5 members (shard-i led by member i%5+1),
// but for those whose number ends in 07, leaderless; and a cluster that
// never had a leader (a split brain only).
func shards(t *testing.T, n int) *api {
	t.Helper()
	a := newAPI(t, &fakeClock{now: t0.Add(time.Hour)})
	for i := range n {
		recs := []history.Record{leaderRecord(uint64(i%5+1), 1, t0.Add(time.Duration(i)*time.Millisecond))}
		if i%100 == 7 {
			recs = append(recs, history.Record{Kind: history.KindEnd, Term: 1, At: ts(i + 500), Reason: string(history.EndSilent)})
		}
		a.apply(t, fmt.Sprintf("shard-%d", i), recs...)
	}
	a.apply(t, "lonely", history.Record{Kind: history.KindSplit, At: ts(0), Reason: history.SplitSameTerm,
		Leaders: []history.Acting{{Leader: 1, Term: 1}, {Leader: 2, Term: 1}}})
	return a
}

// getJSON decodes GET path into v, and returns the answer.
func (a *api) getJSON(t *testing.T, path string, v any) *http.Response {
	t.Helper()
	resp, body := a.do(t, "GET", path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %s %s", path, resp.Status, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %.200s", path, err, body)
	}
	return resp
}

func names(p leadersJSON) []string {
	var out []string
	for _, c := range p.Clusters {
		out = append(out, c.Name)
	}
	return out
}

// GET /api/leaders pages through thousands of clusters in natural order,
// with each one's current leader, the total of those that match, and a
// Link to the next page; following the links visits each once.
func TestLeadersPagesThroughThousands(t *testing.T) {
	a := shards(t, 2000)
	var p leadersJSON
	resp := a.getJSON(t, "/api/leaders", &p)
	if p.Total != 2001 || p.Offset != 0 || p.Limit != 100 || len(p.Clusters) != 100 {
		t.Fatalf("GET /api/leaders: total %d, offset %d, limit %d, %d clusters; want 2001, 0, 100, 100", p.Total, p.Offset, p.Limit, len(p.Clusters))
	}
	if got := names(p)[:12]; fmt.Sprint(got) != "[lonely shard-0 shard-1 shard-2 shard-3 shard-4 shard-5 shard-6 shard-7 shard-8 shard-9 shard-10]" {
		t.Errorf("first names = %v, want lonely, then shard-0 to shard-10 in natural order", got)
	}
	first, shard7 := p.Clusters[1], p.Clusters[8]
	if first.Name != "shard-0" || first.Leader == nil || *first.Leader != 1 || *first.Term != 1 || *first.Algorithm != protocol.Bully ||
		!first.Since.Equal(t0) || first.LeaderlessSince != nil {
		t.Errorf("shard-0 = %+v, want led by 1 in term 1 since t0", first)
	}
	if shard7.Leader != nil || shard7.Term != nil || shard7.Since != nil || shard7.LeaderlessSince == nil || !shard7.LeaderlessSince.Equal(ts(507).Time) {
		t.Errorf("shard-7 = %+v, want no leader, leaderless since its end", shard7)
	}
	if p.Clusters[0].Leader != nil || p.Clusters[0].LeaderlessSince != nil {
		t.Errorf("lonely = %+v, want neither a leader nor an end", p.Clusters[0])
	}
	if link := resp.Header.Get("Link"); link != `</api/leaders?limit=100&offset=100>; rel="next"` {
		t.Errorf("Link = %q, want the next page at offset 100", link)
	}
	// Following the links, 500 at a time.
	var seen []string
	next := "/api/leaders?limit=500"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("more than 5 pages of 500 for 2001 clusters")
		}
		var p leadersJSON
		resp := a.getJSON(t, next, &p)
		seen = append(seen, names(p)...)
		next = ""
		if link := resp.Header.Get("Link"); link != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
	}
	want := append([]string{"lonely"}, make([]string, 2000)...)
	for i := range 2000 {
		want[i+1] = fmt.Sprintf("shard-%d", i)
	}
	if !slices.Equal(seen, want) {
		t.Errorf("following the links: %d names, want each of the 2001 once in natural order", len(seen))
	}
	// GET /api/clusters stays the plain array, sorted as before.
	var plain []string
	a.getJSON(t, "/api/clusters", &plain)
	if len(plain) != 2001 || plain[0] != "lonely" || plain[1] != "shard-0" || plain[2] != "shard-1" || plain[3] != "shard-10" {
		t.Errorf("GET /api/clusters = %d names starting %v, want the 2001 sorted as strings", len(plain), plain[:4])
	}
}

// The page boundaries: the last page is short and has no Link, an offset
// at or past the end gives an empty page with the total.
func TestLeadersPagingBoundaries(t *testing.T) {
	a := shards(t, 1000)
	for _, tc := range []struct {
		query     string
		n         int
		first     string
		wantLink  bool
		wantTotal int
	}{
		{"offset=900&limit=101", 101, "shard-899", false, 1001},
		{"offset=900&limit=100", 100, "shard-899", true, 1001},
		{"offset=1000&limit=500", 1, "shard-999", false, 1001},
		{"offset=1001", 0, "", false, 1001},
		{"offset=5000", 0, "", false, 1001},
		{"limit=1", 1, "lonely", true, 1001},
		{"q=shard-99&limit=500", 11, "shard-99", false, 11},
		{"q=SHARD-99", 11, "shard-99", false, 11},
		{"q=nothing", 0, "", false, 0},
	} {
		var p leadersJSON
		resp := a.getJSON(t, "/api/leaders?"+tc.query, &p)
		first := ""
		if len(p.Clusters) > 0 {
			first = p.Clusters[0].Name
		}
		if len(p.Clusters) != tc.n || first != tc.first || p.Total != tc.wantTotal || (resp.Header.Get("Link") != "") != tc.wantLink {
			t.Errorf("GET /api/leaders?%s: %d clusters from %q, total %d, Link %q; want %d from %q, total %d, a link: %v",
				tc.query, len(p.Clusters), first, p.Total, resp.Header.Get("Link"), tc.n, tc.first, tc.wantTotal, tc.wantLink)
		}
		if p.Clusters == nil {
			t.Errorf("GET /api/leaders?%s: clusters is null, want []", tc.query)
		}
	}
	// The search keeps the natural order: shard-99, shard-199 …, then
	// shard-990 to shard-999.
	var p leadersJSON
	a.getJSON(t, "/api/leaders?q=99", &p)
	if got := names(p); len(got) != 19 || got[0] != "shard-99" || got[1] != "shard-199" || got[18] != "shard-999" {
		t.Errorf("GET /api/leaders?q=99 = %v", got)
	}
}

// Bad parameters are a 400 with a JSON error naming the parameter.
func TestLeadersBadParameters(t *testing.T) {
	a := shards(t, 10)
	for query, want := range map[string]string{
		"limit=0":                             "limit",
		"limit=501":                           "limit",
		"limit=ten":                           "limit",
		"offset=-1":                           "offset",
		"offset=x":                            "offset",
		"leader=0":                            "leader",
		"leader=me":                           "leader",
		"page=2":                              "unknown query parameter",
		"q=" + strings.Repeat("x", 65):        "q",
		"q=shard&limit=100&offset=1&sort=bad": "unknown query parameter",
	} {
		resp, body := a.do(t, "GET", "/api/leaders?"+query)
		var e errorJSON
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, want) {
			t.Errorf("GET /api/leaders?%s = %s %s, want 400 with an error about %s", query, resp.Status, body, want)
		}
	}
	resp, body := a.do(t, "GET", "/api/summary?x=1")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /api/summary?x=1 = %s %s, want 400", resp.Status, body)
	}
}

// GET /api/summary counts the clusters and the ones each member leads;
// GET /api/leaders?leader= lists them.
func TestSummaryCountsLeadersPerMember(t *testing.T) {
	a := shards(t, 2000)
	var s summaryJSON
	a.getJSON(t, "/api/summary", &s)
	want := map[string]int{"1": 400, "2": 400, "3": 380, "4": 400, "5": 400}
	if s.Clusters != 2001 || s.WithLeader != 1980 || s.Leaderless != 20 || s.NeverLed != 1 || fmt.Sprint(s.LeadersPerMember) != fmt.Sprint(want) {
		t.Errorf("GET /api/summary = %+v, want 2001 clusters, 1980 with a leader, 20 leaderless, 1 never led, leaders per member %v", s, want)
	}
	if s.MaxClusters != 20000 || s.Followed != 2001 {
		t.Errorf("GET /api/summary: followed %d of %d, want 2001 of 20000", s.Followed, s.MaxClusters)
	}
	var p leadersJSON
	a.getJSON(t, "/api/leaders?leader=3&limit=500", &p)
	if p.Total != 380 || *p.Clusters[0].Leader != 3 || p.Clusters[0].Name != "shard-2" || p.Clusters[1].Name != "shard-12" {
		t.Errorf("GET /api/leaders?leader=3: total %d, first %v; want 380 from shard-2, shard-12", p.Total, names(p)[:2])
	}
	a.getJSON(t, "/api/leaders?leader=none&q="+url.QueryEscape("-1"), &p)
	// shard-107, shard-1007, shard-1107 … shard-1907: 11.
	if p.Total != 11 || p.Clusters[0].Name != "shard-107" {
		t.Errorf("GET /api/leaders?leader=none&q=-1: total %d, %v; want 11 from shard-107", p.Total, names(p))
	}
	a.getJSON(t, "/api/leaders?leader=none", &p)
	if p.Total != 21 {
		t.Errorf("GET /api/leaders?leader=none: total %d, want 21 (20 leaderless and one never led)", p.Total)
	}
}
