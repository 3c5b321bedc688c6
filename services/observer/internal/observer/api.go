package observer

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	mux.HandleFunc("GET /api/clusters/{cluster}/history", o.apiHistory)
	mux.HandleFunc("GET /api/clusters/{cluster}/leader", o.apiLeader)
	mux.HandleFunc("GET /api/clusters/{cluster}/gaps", o.apiGaps)
	mux.HandleFunc("GET /api/clusters/{cluster}/split-brain", o.apiSplitBrain)
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
}

func leadershipView(c *history.Cluster, i int) leadershipJSON {
	l := c.Leaderships[i]
	v := leadershipJSON{
		Term: l.Term, Leader: l.Leader, Algorithm: l.Algorithm,
		StartedAt:  protocol.Timestamp{Time: l.StartedAt},
		SplitBrain: c.SplitBrainOf(l),
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

// cluster returns the history of the request's cluster, or writes a 400
// for an invalid name and a 404 for an unknown one.
func (o *Observer) cluster(w http.ResponseWriter, r *http.Request) (string, *history.Cluster, bool) {
	name := r.PathValue("cluster")
	if !validClusterName(w, name) {
		return "", nil, false
	}
	c, ok := o.store.Cluster(name)
	if !ok {
		writeError(w, http.StatusNotFound, "unknown cluster %q", name)
		return "", nil, false
	}
	return name, c, true
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
	name, c, ok := o.cluster(w, r)
	if !ok {
		return
	}
	if _, ok := c.Current(); !ok {
		writeError(w, http.StatusNotFound, "cluster %q has no leader now", name)
		return
	}
	writeJSON(w, http.StatusOK, leadershipView(c, len(c.Leaderships)-1))
}

// historyQuery is a parsed history request.
type historyQuery struct {
	afterTerm, beforeTerm uint64
	since, until          time.Time
	limit                 int
	fromEnd               bool
}

func parseHistoryQuery(q url.Values) (historyQuery, error) {
	h := historyQuery{beforeTerm: math.MaxUint64, limit: maxLimit}
	term := func(name string, dst *uint64) error {
		if s := q.Get(name); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a term (a non-negative integer)", name, clip(s))
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
	for _, err := range []error{term("after_term", &h.afterTerm), term("before_term", &h.beforeTerm), at("since", &h.since), at("until", &h.until)} {
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
		h.fromEnd = q.Has("before_term") && !q.Has("after_term")
	}
	return h, nil
}

// pageParams are the query parameters of every list: a range of terms, a
// time range, and a page from the start (limit) or the end (last).
var pageParams = []string{"after_term", "before_term", "since", "until", "limit", "last"}

// page filters items (in increasing term) by the query's terms and time
// range and cuts one page, with a Link header to the next (or, from the
// end, the previous) page. term is an item's term, span when it started
// and ended (zero end: it lasts).
//
// A page never splits the items of one term (several split brains can
// share one), since the next page starts after (or before) a term: it
// holds fewer than the limit, or, when the limit's worth are all of one
// term, every item of that term.
func page[T any](w http.ResponseWriter, r *http.Request, hq historyQuery, now time.Time, items []T, term func(T) uint64, span func(T) (time.Time, time.Time)) []T {
	var out []T
	for _, it := range items {
		t := term(it)
		start, end := span(it)
		if end.IsZero() {
			end = now
		}
		if t <= hq.afterTerm || t >= hq.beforeTerm ||
			(!hq.since.IsZero() && end.Before(hq.since)) ||
			(!hq.until.IsZero() && start.After(hq.until)) {
			continue
		}
		out = append(out, it)
	}
	if len(out) <= hq.limit {
		return out
	}
	// sameTerm reports whether a cut before out[i] splits a term.
	sameTerm := func(i int) bool { return i > 0 && i < len(out) && term(out[i-1]) == term(out[i]) }
	next := url.Values{}
	for k, v := range r.URL.Query() {
		next[k] = v
	}
	if hq.fromEnd {
		// out[cut:] is the page.
		cut := len(out) - hq.limit
		for sameTerm(cut) {
			cut++
		}
		if cut == len(out) {
			// The whole page is one term: take all of it.
			cut = len(out) - hq.limit
			for sameTerm(cut) {
				cut--
			}
		}
		if cut == 0 {
			return out
		}
		out = out[cut:]
		// The previous page: the last ones before this page, within
		// the same bounds.
		next.Del("limit")
		next.Set("last", strconv.Itoa(hq.limit))
		next.Set("before_term", strconv.FormatUint(term(out[0]), 10))
		w.Header().Set("Link", fmt.Sprintf("<%s?%s>; rel=\"prev\"", r.URL.Path, next.Encode()))
	} else {
		// out[:cut] is the page.
		cut := hq.limit
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
		if cut == len(out) {
			return out
		}
		out = out[:cut]
		next.Set("after_term", strconv.FormatUint(term(out[len(out)-1]), 10))
		w.Header().Set("Link", fmt.Sprintf("<%s?%s>; rel=\"next\"", r.URL.Path, next.Encode()))
	}
	return out
}

// listQuery checks and parses a list's query parameters and finds its
// cluster, or writes the error.
func (o *Observer) listQuery(w http.ResponseWriter, r *http.Request) (historyQuery, *history.Cluster, bool) {
	q := r.URL.Query()
	if !checkParams(w, q, pageParams...) {
		return historyQuery{}, nil, false
	}
	hq, err := parseHistoryQuery(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return historyQuery{}, nil, false
	}
	_, c, ok := o.cluster(w, r)
	return hq, c, ok
}

// apiHistory returns the leaderships, oldest first. Parameters:
// after_term, before_term (exclusive term bounds), since, until (RFC 3339:
// leaderships that overlap the range), limit (a page of at most that many,
// from the start, or the end when only before_term is given), last (the
// most recent ones). A truncated page has a Link header to the next one.
func (o *Observer) apiHistory(w http.ResponseWriter, r *http.Request) {
	hq, c, ok := o.listQuery(w, r)
	if !ok {
		return
	}
	idx := make([]int, len(c.Leaderships))
	for i := range idx {
		idx[i] = i
	}
	idx = page(w, r, hq, o.now(), idx,
		func(i int) uint64 { return c.Leaderships[i].Term },
		func(i int) (time.Time, time.Time) {
			l := c.Leaderships[i]
			if !l.Ended() {
				return l.StartedAt, time.Time{}
			}
			return l.StartedAt, l.EndedAt
		})
	out := make([]leadershipJSON, 0, len(idx))
	for _, i := range idx {
		out = append(out, leadershipView(c, i))
	}
	writeJSON(w, http.StatusOK, out)
}

// gaps lists the known leaderless gaps of c, oldest first, the current one
// (if the latest leadership has ended) last with a null end.
func gaps(c *history.Cluster, now time.Time) []gapJSON {
	out := []gapJSON{}
	for i := 1; i < len(c.Leaderships); i++ {
		gap, ok := c.GapBefore(i)
		if !ok || gap == 0 {
			continue
		}
		prev, l := c.Leaderships[i-1], c.Leaderships[i]
		out = append(out, gapJSON{
			AfterTerm: prev.Term, BeforeTerm: &l.Term,
			From: protocol.Timestamp{Time: prev.EndedAt}, To: &protocol.Timestamp{Time: l.StartedAt},
			Seconds: gap.Seconds(),
		})
	}
	if l, ok := c.Latest(); ok && l.Ended() && l.EndReason != history.EndUnobserved {
		out = append(out, gapJSON{AfterTerm: l.Term, From: protocol.Timestamp{Time: l.EndedAt}, Seconds: max(0, now.Sub(l.EndedAt)).Seconds()})
	}
	return out
}

// apiGaps lists the gaps with the same paging and filters as the history:
// a gap's term is the leadership it follows (after_term), its time range
// from the end of one leadership to the start of the next.
func (o *Observer) apiGaps(w http.ResponseWriter, r *http.Request) {
	hq, c, ok := o.listQuery(w, r)
	if !ok {
		return
	}
	now := o.now()
	out := page(w, r, hq, now, gaps(c, now),
		func(g gapJSON) uint64 { return g.AfterTerm },
		func(g gapJSON) (time.Time, time.Time) {
			if g.To == nil {
				return g.From.Time, time.Time{}
			}
			return g.From.Time, g.To.Time
		})
	if out == nil {
		out = []gapJSON{}
	}
	writeJSON(w, http.StatusOK, out)
}

// apiSplitBrain lists the split brains with the same paging and filters as
// the history: an event's term is the newer of its two leaderships'.
func (o *Observer) apiSplitBrain(w http.ResponseWriter, r *http.Request) {
	hq, c, ok := o.listQuery(w, r)
	if !ok {
		return
	}
	all := make([]splitBrainJSON, 0, len(c.SplitBrains))
	for _, s := range c.SplitBrains {
		all = append(all, splitBrainJSON{At: protocol.Timestamp{Time: s.At}, Reason: s.Reason, Leaders: s.Leaders[:]})
	}
	slices.SortStableFunc(all, func(a, b splitBrainJSON) int { return cmp.Compare(splitTerm(a), splitTerm(b)) })
	out := page(w, r, hq, o.now(), all, splitTerm,
		func(s splitBrainJSON) (time.Time, time.Time) { return s.At.Time, s.At.Time })
	if out == nil {
		out = []splitBrainJSON{}
	}
	writeJSON(w, http.StatusOK, out)
}

// splitTerm is the newer term of a split brain's two leaderships.
func splitTerm(s splitBrainJSON) uint64 {
	return max(s.Leaders[0].Term, s.Leaders[len(s.Leaders)-1].Term)
}

// healthz is 200 while connected to NATS and consuming the stream.
func (o *Observer) healthz(w http.ResponseWriter, r *http.Request) {
	if o.connectedAt.Load() == 0 || !o.consuming.Load() {
		http.Error(w, "not ready: waiting for NATS or the announcement stream", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}
