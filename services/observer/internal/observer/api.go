package observer

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// maxLimit is the largest page of history one request returns.
const maxLimit = 10000

// maxClusterName bounds the cluster names the API accepts, and clip what an
// error message echoes of a request.
const maxClusterName = 64

// clip shortens s to maxClusterName bytes for an error message, at a
// character boundary.
func clip(s string) string {
	if len(s) <= maxClusterName {
		return s
	}
	cut := maxClusterName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// routes is the observer's HTTP handler.
func (o *Observer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/clusters", o.apiClusters)
	mux.HandleFunc("GET /api/leaders", o.apiLeaders)
	mux.HandleFunc("GET /api/summary", o.apiSummary)
	mux.HandleFunc("GET /api/clusters/{cluster}/history", o.apiHistory)
	mux.HandleFunc("GET /api/clusters/{cluster}/leader", o.apiLeader)
	mux.HandleFunc("GET /api/clusters/{cluster}/gaps", o.apiGaps)
	mux.HandleFunc("GET /api/clusters/{cluster}/split-brain", o.apiSplitBrain)
	mux.HandleFunc("GET /api/clusters/{cluster}/faulty", o.apiFaulty)
	mux.HandleFunc("GET /api/clusters/{cluster}/members", o.apiMembers)
	mux.HandleFunc("GET /api/clusters/{cluster}/membership", o.apiMembership)
	mux.HandleFunc("GET /api/events", o.apiEvents)
	// Every other request under /api/: 405 with Allow on a path that GET
	// serves, 404 otherwise, both as JSON errors.
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		if _, pattern := mux.Handler(get); pattern != "/api/" {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s: use GET", clip(r.Method), clip(r.URL.Path))
			return
		}
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", clip(r.Method), clip(r.URL.Path))
	})
	// Elsewhere, the mux itself answers a method that no pattern of the
	// path takes with 405 and Allow, and an unknown path with 404.
	mux.HandleFunc("GET /healthz", o.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /{$}", o.page)
	mux.HandleFunc("GET /events", o.events)
	mux.Handle("GET /static/", http.FileServerFS(webFS))
	return mux
}

// leadershipJSON is a leadership as the API renders it. The first five
// fields are the contract's; the others are additions.
type leadershipJSON struct {
	Term      uint64              `json:"term"`
	Leader    uint64              `json:"leader"`
	Algorithm protocol.Algorithm  `json:"algorithm"`
	StartedAt protocol.Timestamp  `json:"started_at"`
	EndedAt   *protocol.Timestamp `json:"ended_at"`
	// EndReason is superseded, resign, silent or unobserved; null while
	// the leadership lasts.
	EndReason *history.EndReason `json:"end_reason"`
	// GapBeforeSeconds is how long the cluster had no leader before this
	// leadership; null when unknown (the first one recorded, or after an
	// unobserved end).
	GapBeforeSeconds *float64 `json:"gap_before_seconds"`
	// SplitBrain is true when this leader acted at the same time as
	// another node.
	SplitBrain bool `json:"split_brain"`
	// Flap is true when the leader before this one took back office
	// within a second of its start (history.Cluster.Flap).
	Flap bool `json:"flap"`
}

func leadershipView(c *history.Cluster, i int) leadershipJSON {
	l := c.Leaderships[i]
	v := leadershipJSON{
		Term: l.Term, Leader: l.Leader, Algorithm: l.Algorithm,
		StartedAt:  protocol.Timestamp{Time: l.StartedAt},
		SplitBrain: c.SplitBrainOf(l),
		Flap:       c.Flap(i),
	}
	if l.Ended() {
		v.EndedAt = &protocol.Timestamp{Time: l.EndedAt}
		v.EndReason = &l.EndReason
	}
	if gap, ok := c.GapBefore(i); ok {
		s := gap.Seconds()
		v.GapBeforeSeconds = &s
	}
	return v
}

type gapJSON struct {
	// AfterTerm is the leadership that ended, BeforeTerm the one that
	// started, null while the gap lasts.
	AfterTerm  uint64              `json:"after_term"`
	BeforeTerm *uint64             `json:"before_term"`
	From       protocol.Timestamp  `json:"from"`
	To         *protocol.Timestamp `json:"to"`
	Seconds    float64             `json:"seconds"`
}

type splitBrainJSON struct {
	At      protocol.Timestamp `json:"at"`
	Reason  string             `json:"reason"`
	Leaders []history.Acting   `json:"leaders"`
}

// faultyJSON is a member proven to have lied, with the proof: its two
// contradicting statements and their signatures, in certify's JSON form
// ({"member":…,"first":<signed statement>,"second":<signed statement>}).
type faultyJSON struct {
	Member   uint64             `json:"member"`
	At       protocol.Timestamp `json:"at"`
	Evidence *certify.Evidence  `json:"evidence"`
}

type errorJSON struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, errorJSON{Error: fmt.Sprintf(format, args...)})
}

// checkParams rejects query parameters other than allowed.
func checkParams(w http.ResponseWriter, q url.Values, allowed ...string) bool {
	for name := range q {
		if !slices.Contains(allowed, name) {
			writeError(w, http.StatusBadRequest, "unknown query parameter %q", clip(name))
			return false
		}
	}
	return true
}

// validClusterName reports whether name is a cluster name the API
// accepts, or writes a 400.
func validClusterName(w http.ResponseWriter, name string) bool {
	if err := protocol.ValidateCluster(name); err != nil || len(name) > maxClusterName {
		writeError(w, http.StatusBadRequest, "invalid cluster name %q: must match [A-Za-z0-9_-]+, at most %d bytes", clip(name), maxClusterName)
		return false
	}
	return true
}

// readCluster calls read with the history of the request's cluster,
// under the store's read lock and without copying it, or writes a 400 for
// an invalid name and a 404 for an unknown one. read must copy what it
// keeps, and only that: the page or the record it answers, never the
// whole history.
func (o *Observer) readCluster(w http.ResponseWriter, r *http.Request, read func(c *history.Cluster)) (string, bool) {
	name := r.PathValue("cluster")
	if !validClusterName(w, name) {
		return "", false
	}
	if !o.store.Read(name, read) {
		writeError(w, http.StatusNotFound, "unknown cluster %q", name)
		return "", false
	}
	return name, true
}

func (o *Observer) apiClusters(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	writeJSON(w, http.StatusOK, o.store.Clusters())
}

func (o *Observer) apiLeader(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	var current *leadershipJSON
	name, ok := o.readCluster(w, r, func(c *history.Cluster) {
		if _, ok := c.Current(); ok {
			v := leadershipView(c, len(c.Leaderships)-1)
			current = &v
		}
	})
	if !ok {
		return
	}
	if current == nil {
		writeError(w, http.StatusNotFound, "cluster %q has no leader now", name)
		return
	}
	writeJSON(w, http.StatusOK, current)
}

// historyQuery is a parsed list request. Its positions are the terms of
// the history, gaps and split brains, or the sequence numbers of the
// member events (place).
type historyQuery struct {
	afterTerm, beforeTerm uint64
	since, until          time.Time
	limit                 int
	fromEnd               bool
	place                 listPlace
}

// listPlace names a list's position parameters and what a position is.
type listPlace struct{ after, before, what string }

// termPlace places the items of the history, gaps and split brains by
// term; seqPlace places the member events by their seq.
var (
	termPlace = listPlace{after: "after_term", before: "before_term", what: "a term"}
	seqPlace  = listPlace{after: "after_seq", before: "before_seq", what: "a sequence number"}
)

// params are the query parameters of a list placed by c.
func (c listPlace) params() []string {
	return []string{c.after, c.before, "since", "until", "limit", "last"}
}

// parseHistoryQuery parses the query of a list placed by term.
func parseHistoryQuery(q url.Values) (historyQuery, error) { return parseListQuery(q, termPlace) }

// parseListQuery parses the query of a list placed by cur.
func parseListQuery(q url.Values, cur listPlace) (historyQuery, error) {
	h := historyQuery{beforeTerm: math.MaxUint64, limit: maxLimit, place: cur}
	term := func(name string, dst *uint64) error {
		if s := q.Get(name); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not %s (a non-negative integer)", name, clip(s), cur.what)
			}
			*dst = v
		}
		return nil
	}
	at := func(name string, dst *time.Time) error {
		if s := q.Get(name); s != "" {
			v, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return fmt.Errorf("%s: %q is not an RFC 3339 time", name, clip(s))
			}
			*dst = v
		}
		return nil
	}
	count := func(name string) (int, bool, error) {
		s := q.Get(name)
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxLimit {
			return 0, false, fmt.Errorf("%s: %q must be an integer from 1 to %d", name, clip(s), maxLimit)
		}
		return v, true, nil
	}
	for _, err := range []error{term(cur.after, &h.afterTerm), term(cur.before, &h.beforeTerm), at("since", &h.since), at("until", &h.until)} {
		if err != nil {
			return h, err
		}
	}
	if !h.until.IsZero() && h.until.Before(h.since) {
		return h, fmt.Errorf("until: %s is before since", clip(q.Get("until")))
	}
	limit, hasLimit, err := count("limit")
	if err != nil {
		return h, err
	}
	last, hasLast, err := count("last")
	if err != nil {
		return h, err
	}
	switch {
	case hasLimit && hasLast:
		return h, fmt.Errorf("last: give either limit or last")
	case hasLast:
		h.limit, h.fromEnd = last, true
	case hasLimit:
		h.limit = limit
		// Paging backwards from before_term returns the page just
		// before it.
		h.fromEnd = q.Has(cur.before) && !q.Has(cur.after)
	}
	return h, nil
}

// list is a list as page reads it, in place: n positions whose terms
// increase (not strictly: several split brains may share one).
type list struct {
	n    int
	term func(k int) uint64
	// item returns when the item at k starts and ends (a zero end: it
	// lasts), or false if k holds no item (a leadership with no known
	// gap after it).
	item func(k int) (start, end time.Time, ok bool)
}

// page returns the positions of the items of l in one page, in increasing
// term: those that pass the query's terms and time range, cut to its
// limit, from the start or from the end. link is the Link header's value
// for the next (or, from the end, the previous) page, empty on the last.
//
// page reads only what the page needs: it finds the term bounds by binary
// search, and walks from one end, past what the time range filters out,
// until it has one item more than the page holds. What it allocates
// grows with the page, never with the list.
//
// A page never splits the items of one term (several split brains can
// share one), since the next page starts after (or before) a term: it
// holds fewer than the limit, or, when the limit's worth are all of one
// term, every item of that term.
func page(r *http.Request, hq historyQuery, now time.Time, l list) (positions []int, link string) {
	lo := sort.Search(l.n, func(k int) bool { return l.term(k) > hq.afterTerm })
	hi := sort.Search(l.n, func(k int) bool { return l.term(k) >= hq.beforeTerm })
	if lo >= hi {
		return nil, ""
	}
	match := func(k int) bool {
		start, end, ok := l.item(k)
		if !ok {
			return false
		}
		if end.IsZero() {
			end = now
		}
		return (hq.since.IsZero() || !end.Before(hq.since)) && (hq.until.IsZero() || !start.After(hq.until))
	}
	// got holds the matching positions found so far, walking from the
	// start (or, for a page from the end, backwards from the end); has
	// walks on until got holds i+1 of them, if there are.
	got := make([]int, 0, min(hq.limit+1, hi-lo))
	next, step := lo, 1
	if hq.fromEnd {
		next, step = hi-1, -1
	}
	has := func(i int) bool {
		for len(got) <= i && lo <= next && next < hi {
			if match(next) {
				got = append(got, next)
			}
			next += step
		}
		return i < len(got)
	}
	// sameTerm reports whether a cut before got[i] splits a term.
	sameTerm := func(i int) bool { return i > 0 && has(i) && l.term(got[i-1]) == l.term(got[i]) }
	// The page is got[:cut], walking forwards or backwards alike.
	cut := hq.limit
	if has(cut) {
		for sameTerm(cut) {
			cut--
		}
		if cut == 0 {
			// The whole page is one term: take all of it.
			cut = hq.limit
			for sameTerm(cut) {
				cut++
			}
		}
	}
	more := has(cut)
	got = got[:min(cut, len(got))]
	if hq.fromEnd {
		slices.Reverse(got)
	}
	if !more || len(got) == 0 {
		return got, ""
	}
	params := url.Values{}
	for k, v := range r.URL.Query() {
		params[k] = v
	}
	if hq.fromEnd {
		// The previous page: the last ones before this page, within
		// the same bounds.
		params.Del("limit")
		params.Set("last", strconv.Itoa(hq.limit))
		params.Set(hq.place.before, strconv.FormatUint(l.term(got[0]), 10))
		return got, fmt.Sprintf("<%s?%s>; rel=\"prev\"", r.URL.Path, params.Encode())
	}
	params.Set(hq.place.after, strconv.FormatUint(l.term(got[len(got)-1]), 10))
	return got, fmt.Sprintf("<%s?%s>; rel=\"next\"", r.URL.Path, params.Encode())
}

// listQuery checks and parses the query parameters of a list placed by
// cur, or writes the error.
func listQuery(w http.ResponseWriter, r *http.Request, cur listPlace) (historyQuery, bool) {
	q := r.URL.Query()
	if !checkParams(w, q, cur.params()...) {
		return historyQuery{}, false
	}
	hq, err := parseListQuery(q, cur)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return historyQuery{}, false
	}
	return hq, true
}

// writePage writes a list's page with its Link header.
func writePage[T any](w http.ResponseWriter, out []T, link string) {
	if link != "" {
		w.Header().Set("Link", link)
	}
	if out == nil {
		out = []T{}
	}
	writeJSON(w, http.StatusOK, out)
}

// leaderships is c's leaderships as a list.
func leaderships(c *history.Cluster) list {
	return list{
		n:    len(c.Leaderships),
		term: func(k int) uint64 { return c.Leaderships[k].Term },
		item: func(k int) (time.Time, time.Time, bool) {
			l := c.Leaderships[k]
			return l.StartedAt, l.EndedAt, true
		},
	}
}

// apiHistory returns the leaderships, oldest first. Parameters:
// after_term, before_term (exclusive term bounds), since, until (RFC 3339:
// leaderships that overlap the range), limit (a page of at most that many,
// from the start, or the end when only before_term is given), last (the
// most recent ones). A truncated page has a Link header to the next one.
func (o *Observer) apiHistory(w http.ResponseWriter, r *http.Request) {
	hq, ok := listQuery(w, r, termPlace)
	if !ok {
		return
	}
	now := o.now()
	var out []leadershipJSON
	var link string
	if _, ok := o.readCluster(w, r, func(c *history.Cluster) {
		var at []int
		at, link = page(r, hq, now, leaderships(c))
		out = make([]leadershipJSON, 0, len(at))
		for _, i := range at {
			out = append(out, leadershipView(c, i))
		}
	}); !ok {
		return
	}
	writePage(w, out, link)
}

// gaps is c's known leaderless gaps as a list: position k is the gap
// after leadership k, whose term is the gap's; the current one (if the
// latest leadership has ended, and not unobserved) lasts.
func gaps(c *history.Cluster) list {
	n := len(c.Leaderships)
	return list{
		n:    n,
		term: func(k int) uint64 { return c.Leaderships[k].Term },
		item: func(k int) (time.Time, time.Time, bool) {
			prev := c.Leaderships[k]
			if k == n-1 {
				return prev.EndedAt, time.Time{}, prev.Ended() && prev.EndReason != history.EndUnobserved
			}
			gap, ok := c.GapBefore(k + 1)
			return prev.EndedAt, c.Leaderships[k+1].StartedAt, ok && gap > 0
		},
	}
}

// gapView renders the gap after leadership k, one of gaps(c).
func gapView(c *history.Cluster, k int, now time.Time) gapJSON {
	prev := c.Leaderships[k]
	if k == len(c.Leaderships)-1 {
		return gapJSON{AfterTerm: prev.Term, From: protocol.Timestamp{Time: prev.EndedAt}, Seconds: max(0, now.Sub(prev.EndedAt)).Seconds()}
	}
	l := c.Leaderships[k+1]
	gap, _ := c.GapBefore(k + 1)
	return gapJSON{
		AfterTerm: prev.Term, BeforeTerm: &l.Term,
		From: protocol.Timestamp{Time: prev.EndedAt}, To: &protocol.Timestamp{Time: l.StartedAt},
		Seconds: gap.Seconds(),
	}
}

// apiGaps lists the gaps with the same paging and filters as the history:
// a gap's term is the leadership it follows (after_term), its time range
// from the end of one leadership to the start of the next.
func (o *Observer) apiGaps(w http.ResponseWriter, r *http.Request) {
	hq, ok := listQuery(w, r, termPlace)
	if !ok {
		return
	}
	now := o.now()
	var out []gapJSON
	var link string
	if _, ok := o.readCluster(w, r, func(c *history.Cluster) {
		var at []int
		at, link = page(r, hq, now, gaps(c))
		out = make([]gapJSON, 0, len(at))
		for _, k := range at {
			out = append(out, gapView(c, k, now))
		}
	}); !ok {
		return
	}
	writePage(w, out, link)
}

// apiSplitBrain lists the split brains with the same paging and filters as
// the history: an event's term is the newer of its two leaderships'.
func (o *Observer) apiSplitBrain(w http.ResponseWriter, r *http.Request) {
	hq, ok := listQuery(w, r, termPlace)
	if !ok {
		return
	}
	var out []splitBrainJSON
	var link string
	if _, ok := o.readCluster(w, r, func(c *history.Cluster) {
		// The history keeps them in the order seen, which is the
		// order of their terms but for a stale leader seen late: then
		// the page walks an order of their own, the one copy here.
		splits := c.SplitBrains
		order := func(k int) int { return k }
		byTerm := func(a, b history.SplitBrain) int { return cmp.Compare(splitTerm(a), splitTerm(b)) }
		if !slices.IsSortedFunc(splits, byTerm) {
			sorted := make([]int, len(splits))
			for k := range sorted {
				sorted[k] = k
			}
			slices.SortStableFunc(sorted, func(a, b int) int { return byTerm(splits[a], splits[b]) })
			order = func(k int) int { return sorted[k] }
		}
		var at []int
		at, link = page(r, hq, time.Time{}, list{
			n:    len(splits),
			term: func(k int) uint64 { return splitTerm(splits[order(k)]) },
			item: func(k int) (time.Time, time.Time, bool) {
				at := splits[order(k)].At
				return at, at, true
			},
		})
		out = make([]splitBrainJSON, 0, len(at))
		for _, k := range at {
			s := splits[order(k)]
			out = append(out, splitBrainJSON{At: protocol.Timestamp{Time: s.At}, Reason: s.Reason, Leaders: []history.Acting{s.Leaders[0], s.Leaders[1]}})
		}
	}); !ok {
		return
	}
	writePage(w, out, link)
}

// apiFaulty lists the members of the cluster proven to have lied, in the
// order recorded, each with its proof. The list is short (one entry per
// member at most), so it takes no paging.
func (o *Observer) apiFaulty(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	var out []faultyJSON
	if _, ok := o.readCluster(w, r, func(c *history.Cluster) {
		out = make([]faultyJSON, 0, len(c.Faulty))
		for _, f := range c.Faulty {
			e := f.Evidence
			out = append(out, faultyJSON{Member: f.Member, At: protocol.Timestamp{Time: f.At}, Evidence: &e})
		}
	}); !ok {
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// splitTerm is the newer term of a split brain's two leaderships.
func splitTerm(s history.SplitBrain) uint64 {
	return max(s.Leaders[0].Term, s.Leaders[1].Term)
}

// healthz is 200 while connected to NATS and consuming the stream.
func (o *Observer) healthz(w http.ResponseWriter, r *http.Request) {
	if o.connectedAt.Load() == 0 || !o.consuming.Load() {
		http.Error(w, "not ready: waiting for NATS or the announcement stream", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}
