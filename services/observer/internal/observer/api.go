package observer

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// maxLimit is the largest page of history one request returns.
const maxLimit = 10000

// routes is the observer's HTTP handler.
func (o *Observer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/clusters", o.apiClusters)
	mux.HandleFunc("GET /api/clusters/{cluster}/history", o.apiHistory)
	mux.HandleFunc("GET /api/clusters/{cluster}/leader", o.apiLeader)
	mux.HandleFunc("GET /api/clusters/{cluster}/gaps", o.apiGaps)
	mux.HandleFunc("GET /api/clusters/{cluster}/split-brain", o.apiSplitBrain)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
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
			writeError(w, http.StatusBadRequest, "unknown query parameter %q", name)
			return false
		}
	}
	return true
}

// cluster returns the history of the request's cluster, or writes a 400
// for an invalid name and a 404 for an unknown one.
func (o *Observer) cluster(w http.ResponseWriter, r *http.Request) (string, *history.Cluster, bool) {
	name := r.PathValue("cluster")
	if err := protocol.ValidateCluster(name); err != nil {
		writeError(w, http.StatusBadRequest, "invalid cluster name %q: must match [A-Za-z0-9_-]+", name)
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
				return fmt.Errorf("%s: %q is not a term (a non-negative integer)", name, s)
			}
			*dst = v
		}
		return nil
	}
	at := func(name string, dst *time.Time) error {
		if s := q.Get(name); s != "" {
			v, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return fmt.Errorf("%s: %q is not an RFC 3339 time", name, s)
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
			return 0, false, fmt.Errorf("%s: %q must be an integer from 1 to %d", name, s, maxLimit)
		}
		return v, true, nil
	}
	for _, err := range []error{term("after_term", &h.afterTerm), term("before_term", &h.beforeTerm), at("since", &h.since), at("until", &h.until)} {
		if err != nil {
			return h, err
		}
	}
	if !h.until.IsZero() && h.until.Before(h.since) {
		return h, fmt.Errorf("until: %s is before since", q.Get("until"))
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

// apiHistory returns the leaderships, oldest first. Parameters:
// after_term, before_term (exclusive term bounds), since, until (RFC 3339:
// leaderships that overlap the range), limit (a page of at most that many,
// from the start, or the end when only before_term is given), last (the
// most recent ones). A truncated page has a Link header to the next one.
func (o *Observer) apiHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !checkParams(w, q, "after_term", "before_term", "since", "until", "limit", "last") {
		return
	}
	hq, err := parseHistoryQuery(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	_, c, ok := o.cluster(w, r)
	if !ok {
		return
	}
	now := o.now()
	var idx []int
	for i, l := range c.Leaderships {
		end := l.EndedAt
		if !l.Ended() {
			end = now
		}
		if l.Term <= hq.afterTerm || l.Term >= hq.beforeTerm ||
			(!hq.since.IsZero() && end.Before(hq.since)) ||
			(!hq.until.IsZero() && l.StartedAt.After(hq.until)) {
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) > hq.limit {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		if hq.fromEnd {
			idx = idx[len(idx)-hq.limit:]
			next.Del("last")
			next.Del("after_term")
			next.Set("limit", strconv.Itoa(hq.limit))
			next.Set("before_term", strconv.FormatUint(c.Leaderships[idx[0]].Term, 10))
			w.Header().Set("Link", fmt.Sprintf("<%s?%s>; rel=\"prev\"", r.URL.Path, next.Encode()))
		} else {
			idx = idx[:hq.limit]
			next.Set("after_term", strconv.FormatUint(c.Leaderships[idx[len(idx)-1]].Term, 10))
			w.Header().Set("Link", fmt.Sprintf("<%s?%s>; rel=\"next\"", r.URL.Path, next.Encode()))
		}
	}
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

func (o *Observer) apiGaps(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	if _, c, ok := o.cluster(w, r); ok {
		writeJSON(w, http.StatusOK, gaps(c, o.now()))
	}
}

func (o *Observer) apiSplitBrain(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	_, c, ok := o.cluster(w, r)
	if !ok {
		return
	}
	out := make([]splitBrainJSON, 0, len(c.SplitBrains))
	for _, s := range c.SplitBrains {
		out = append(out, splitBrainJSON{At: protocol.Timestamp{Time: s.At}, Reason: s.Reason, Leaders: s.Leaders[:]})
	}
	writeJSON(w, http.StatusOK, out)
}

// healthz is 200 while connected to NATS and consuming the stream.
func (o *Observer) healthz(w http.ResponseWriter, r *http.Request) {
	if o.connectedAt.Load() == 0 || !o.consuming.Load() {
		http.Error(w, "not ready: waiting for NATS or the announcement stream", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}
