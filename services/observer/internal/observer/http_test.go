package observer

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// api serves an observer's HTTP handler over a history written by the
// test, with no NATS: for what the API does with what is recorded.
type api struct {
	*Observer
	srv *httptest.Server
}

func newAPI(t testing.TB, clock *fakeClock) *api {
	t.Helper()
	dir := t.TempDir()
	store, err := history.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := New(testConfig("nats://127.0.0.1:4222", dir), testLogger())
	o.store = store
	o.now = clock.Now
	a := &api{Observer: o, srv: httptest.NewServer(o.routes())}
	t.Cleanup(a.srv.Close)
	return a
}

func (a *api) apply(t *testing.T, cluster string, recs ...history.Record) {
	t.Helper()
	if _, err := a.store.Apply(cluster, recs...); err != nil {
		t.Fatal(err)
	}
	a.wrote() // as record does once it wrote what it admitted
}

// do sends a request and returns the answer with its body read.
func (a *api) do(t *testing.T, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %.80s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func ts(ms int) protocol.Timestamp {
	return protocol.Timestamp{Time: t0.Add(time.Duration(ms) * time.Millisecond)}
}

// Every path answers a method it does not serve with 405 and Allow, and
// a method it serves with anything else; under /api/ the 405 is a JSON
// error, and so is the 404 of an unknown path.
func TestMethodNotAllowedOnEveryPath(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0})
	a.apply(t, "a", history.Record{Kind: history.KindLeader, Term: 1, Leader: 3, Algorithm: protocol.Bully, At: ts(0)})
	for _, path := range []string{
		"/", "/events", "/healthz", "/metrics", "/static/", "/static/style.css", "/static/app.js",
		"/api/clusters", "/api/leaders", "/api/summary", "/api/clusters/a/history", "/api/clusters/a/leader", "/api/clusters/a/gaps",
		"/api/clusters/a/split-brain", "/api/clusters/a/members", "/api/clusters/a/membership", "/api/events",
	} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			resp, body := a.do(t, method, path)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s = %d, Allow %q; want 405, Allow GET, HEAD", method, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
			var e errorJSON
			if strings.HasPrefix(path, "/api/") && (json.Unmarshal([]byte(body), &e) != nil || e.Error == "") {
				t.Errorf("%s %s: body %q, want a JSON error", method, path, body)
			}
		}
		// HEAD is served wherever GET is (the streams answer at once).
		if resp, _ := a.do(t, http.MethodHead, path); resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound {
			t.Errorf("HEAD %s = %d, want it served", path, resp.StatusCode)
		}
	}
	for _, tc := range []struct {
		method, path string
		json         bool
	}{
		{http.MethodGet, "/api/nothing", true},
		{http.MethodPost, "/api/nothing", true},
		{http.MethodGet, "/api/clusters/a/nothing", true},
		{http.MethodGet, "/api/clusters/a/history/more", true},
		{http.MethodGet, "/api/", true},
		{http.MethodGet, "/nothing", false},
		{http.MethodGet, "/static/nothing.js", false},
	} {
		resp, body := a.do(t, tc.method, tc.path)
		var e errorJSON
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s = %d, want 404", tc.method, tc.path, resp.StatusCode)
		}
		if tc.json && (resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil || e.Error == "") {
			t.Errorf("%s %s: %q %q, want a JSON error", tc.method, tc.path, resp.Header.Get("Content-Type"), body)
		}
	}
}

// No error echoes more than 64 bytes of what the request names: cluster
// names, parameter names and values, paths.
func TestErrorsDoNotEchoTheRequest(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0})
	a.apply(t, "a", history.Record{Kind: history.KindLeader, Term: 1, Leader: 3, Algorithm: protocol.Bully, At: ts(0)})
	long := strings.Repeat("x", 5000)
	echo := regexp.MustCompile(`x{65}`)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/api/clusters/" + long + "/history", 400},
		{http.MethodGet, "/api/clusters/" + long + "/gaps", 400},
		{http.MethodGet, "/api/clusters/" + strings.Repeat("x", 65) + "/leader", 400},
		{http.MethodGet, "/api/events?cluster=" + long, 400},
		{http.MethodGet, "/api/events?" + long + "=1", 400},
		{http.MethodGet, "/api/clusters/a/history?" + long + "=1", 400},
		{http.MethodGet, "/api/clusters/a/history?since=" + long, 400},
		{http.MethodGet, "/api/clusters/a/gaps?until=" + long, 400},
		{http.MethodGet, "/api/clusters/a/split-brain?limit=" + long, 400},
		{http.MethodGet, "/api/clusters/a/history?last=" + long, 400},
		{http.MethodGet, "/api/clusters/a/history?after_term=" + long, 400},
		{http.MethodGet, "/api/clusters/" + long + "/members", 400},
		{http.MethodGet, "/api/clusters/a/members?" + long + "=1", 400},
		{http.MethodGet, "/api/clusters/a/membership?before_seq=" + long, 400},
		{http.MethodGet, "/api/clusters/a/history?since=2026-11-21T22:00:00Z&until=2026-11-20T00:00:00.000000000" + long, 400},
		{http.MethodGet, "/api/" + long, 404},
		{http.MethodPost, "/api/clusters/" + long + "/history", 405},
	} {
		resp, body := a.do(t, tc.method, tc.path)
		var e errorJSON
		if resp.StatusCode != tc.code || json.Unmarshal([]byte(body), &e) != nil {
			t.Errorf("%s %.80s = %d %.100q, want %d and a JSON error", tc.method, tc.path, resp.StatusCode, body, tc.code)
		}
		if echo.MatchString(e.Error) || len(e.Error) > 300 {
			t.Errorf("%s %.80s: the error echoes the request: %d bytes, %.120q", tc.method, tc.path, len(e.Error), e.Error)
		}
	}
	// The limit is 64 bytes: a name of 64 is valid (and unknown).
	if resp, _ := a.do(t, http.MethodGet, "/api/clusters/"+strings.Repeat("x", 64)+"/history"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a cluster name of 64 bytes: %d, want 404 (valid, unknown)", resp.StatusCode)
	}
}

// pagingHistory writes a cluster whose three lists have several items,
// with split brains that share a term.
func pagingHistory(t *testing.T, a *api) {
	t.Helper()
	var recs []history.Record
	for term := uint64(1); term <= 7; term++ {
		start := int(term) * 1000
		recs = append(recs, history.Record{Kind: history.KindLeader, Term: term, Leader: term%3 + 1, Algorithm: protocol.Ring, At: ts(start)})
		if term < 7 {
			recs = append(recs, history.Record{Kind: history.KindEnd, Term: term, At: ts(start + 800), Reason: string(history.EndSilent)})
		}
	}
	split := func(ms int, reason string, a, b history.Acting) history.Record {
		return history.Record{Kind: history.KindSplit, At: ts(ms), Reason: reason, Leaders: []history.Acting{a, b}}
	}
	recs = append(recs,
		split(2100, history.SplitStaleLeader, history.Acting{Leader: 2, Term: 1}, history.Acting{Leader: 3, Term: 2}),
		split(3100, history.SplitSameTerm, history.Acting{Leader: 1, Term: 3}, history.Acting{Leader: 2, Term: 3}),
		split(3200, history.SplitSameTerm, history.Acting{Leader: 1, Term: 3}, history.Acting{Leader: 3, Term: 3}),
		split(3300, history.SplitSameTerm, history.Acting{Leader: 2, Term: 3}, history.Acting{Leader: 3, Term: 3}),
		split(5100, history.SplitStaleLeader, history.Acting{Leader: 2, Term: 4}, history.Acting{Leader: 3, Term: 5}),
	)
	a.apply(t, "a", recs...)
}

// items fetches a list and returns its items as raw JSON, and the URL and
// relation of its Link header ("" if none).
func (a *api) items(t *testing.T, path string) ([]string, string, string) {
	t.Helper()
	resp, body := a.do(t, http.MethodGet, path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	items := make([]string, len(raw))
	for i, r := range raw {
		items[i] = string(r)
	}
	link := resp.Header.Get("Link")
	if link == "" {
		return items, "", ""
	}
	m := regexp.MustCompile(`^<([^>]+)>; rel="(next|prev)"$`).FindStringSubmatch(link)
	if m == nil {
		t.Fatalf("GET %s: Link %q, want <url>; rel=\"next\" or \"prev\"", path, link)
	}
	return items, m[1], m[2]
}

// Every list pages the same way: following the Link headers from the
// first page with limit, or from the last page with last, yields the
// whole list once, in order, within its filters; no page splits a term.
func TestPagingOnEveryList(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0.Add(10 * time.Second)})
	pagingHistory(t, a)
	base := "/api/clusters/a/"
	for _, list := range []string{"history", "gaps", "split-brain"} {
		for _, filter := range []string{"", "since=2026-11-21T22:00:02.9Z&until=2026-11-21T22:00:05.5Z", "after_term=2&before_term=6"} {
			path := base + list
			if filter != "" {
				path += "?" + filter
			}
			all, link, _ := a.items(t, path)
			if link != "" {
				t.Errorf("%s: Link %q on a whole list", path, link)
			}
			if len(all) < 2 {
				t.Fatalf("%s: %d items; the test needs more", path, len(all))
			}
			sep := "?"
			if filter != "" {
				sep = "?" + filter + "&"
			}
			for limit := 1; limit <= len(all)+1; limit++ {
				// Forwards.
				var got []string
				next := fmt.Sprintf("%s%s%slimit=%d", base, list, sep, limit)
				for pages := 0; next != ""; pages++ {
					if pages > len(all) {
						t.Fatalf("%s: more pages than items", path)
					}
					page, link, rel := a.items(t, next)
					checkPage(t, next, page, limit, rel, "next")
					got = append(got, page...)
					next = link
				}
				if strings.Join(got, "\n") != strings.Join(all, "\n") {
					t.Errorf("%s by %d forwards:\n%s\nwant\n%s", path, limit, strings.Join(got, "\n"), strings.Join(all, "\n"))
				}
				// Backwards.
				got = nil
				prev := fmt.Sprintf("%s%s%slast=%d", base, list, sep, limit)
				for pages := 0; prev != ""; pages++ {
					if pages > len(all) {
						t.Fatalf("%s: more pages than items", path)
					}
					page, link, rel := a.items(t, prev)
					checkPage(t, prev, page, limit, rel, "prev")
					got = append(page, got...)
					prev = link
				}
				if strings.Join(got, "\n") != strings.Join(all, "\n") {
					t.Errorf("%s by %d backwards:\n%s\nwant\n%s", path, limit, strings.Join(got, "\n"), strings.Join(all, "\n"))
				}
			}
		}
	}
	// The three split brains of term 3 stay on one page, even for a
	// limit of 1 or 2; a limit of 2 stops before them.
	for _, tc := range []struct {
		query string
		want  int
	}{{"limit=1&after_term=2", 3}, {"limit=2&after_term=2", 3}, {"limit=2", 1}, {"limit=4", 4}, {"last=2", 1}, {"last=1&before_term=5", 3}} {
		if page, _, _ := a.items(t, base+"split-brain?"+tc.query); len(page) != tc.want {
			t.Errorf("split-brain?%s: %d items, want %d", tc.query, len(page), tc.want)
		}
	}
}

// checkPage checks one page's size and the relation of its Link.
func checkPage(t *testing.T, path string, page []string, limit int, rel, wantRel string) {
	t.Helper()
	if rel != "" && rel != wantRel {
		t.Errorf("%s: Link rel %q, want %q", path, rel, wantRel)
	}
	if len(page) > limit && !oneTerm(page) {
		t.Errorf("%s: %d items over the limit, and not of one term", path, len(page))
	}
	if len(page) == 0 {
		t.Errorf("%s: an empty page", path)
	}
}

// oneTerm reports whether every split brain of page has the same term.
func oneTerm(page []string) bool {
	terms := map[uint64]bool{}
	for _, item := range page {
		var s splitBrainJSON
		if json.Unmarshal([]byte(item), &s) != nil || len(s.Leaders) != 2 {
			return false
		}
		terms[max(s.Leaders[0].Term, s.Leaders[1].Term)] = true
	}
	return len(terms) == 1
}

// The Link of a page keeps the request's other parameters, and is a
// relative URL that the same server answers.
func TestLinkKeepsTheFilters(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0.Add(10 * time.Second)})
	pagingHistory(t, a)
	_, link, rel := a.items(t, "/api/clusters/a/history?since=2026-11-21T22:00:02.9Z&limit=2")
	u, err := url.Parse(link)
	if err != nil || rel != "next" || u.Path != "/api/clusters/a/history" {
		t.Fatalf("Link %q rel %q, want a next page of the history", link, rel)
	}
	if q := u.Query(); q.Get("since") != "2026-11-21T22:00:02.9Z" || q.Get("limit") != "2" || q.Get("after_term") != "4" {
		t.Errorf("next page query %v, want since kept, limit 2, after_term 4 (term 2 ended before since)", q)
	}
	_, link, rel = a.items(t, "/api/clusters/a/history?after_term=1&last=2")
	u, _ = url.Parse(link)
	if q := u.Query(); rel != "prev" || q.Get("after_term") != "1" || q.Get("last") != "2" || q.Get("before_term") != "6" {
		t.Errorf("previous page %q rel %q, want after_term 1 kept, last 2, before_term 6", link, rel)
	}
}
