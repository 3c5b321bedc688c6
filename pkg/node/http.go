package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves GET /healthz, GET /status and GET /metrics, and POST
// /voters (ChangeVoters; Paxos with dynamic membership).
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /voters", n.serveVoters)
	mux.Handle("/", newHandler(n, n.metrics.registry))
	return mux
}

// MaxStatusWait bounds the wait of GET /status?wait=.
const MaxStatusWait = 5 * time.Minute

// statusSource is what the HTTP handler reads of a node: the snapshot it
// published last, whether it is healthy, and a channel woken when the
// snapshot changes.
type statusSource interface {
	snapshot() *view
	Healthy() bool
	watch() chan struct{}
	unwatch(chan struct{})
}

// statusHandler serves a node's HTTP endpoints from a statusSource.
type statusHandler struct{ src statusSource }

// newHandler serves GET /healthz and GET /status from src, and GET
// /metrics from reg.
func newHandler(src statusSource, reg prometheus.Gatherer) http.Handler {
	h := statusHandler{src}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !src.Healthy() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", h.serveStatus)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// serveStatus answers GET /status with the node's status and its ETag.
// With ?wait=<duration> (at most MaxStatusWait) and an If-None-Match
// header naming the current ETag, it waits until the status changes, and
// answers 304 Not Modified if the wait passes first: a client follows a
// node's view without polling it.
func (h statusHandler) serveStatus(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxStatusWait {
			http.Error(w, fmt.Sprintf("wait: %q is not a duration from 0 to %v, such as 30s", v, MaxStatusWait), http.StatusBadRequest)
			return
		}
		wait = d
	}
	st, _ := h.src.snapshot().at(time.Now())
	if match := r.Header.Get("If-None-Match"); wait > 0 && match == st.ETag() {
		changed := h.src.watch()
		defer h.src.unwatch(changed)
		deadline := time.NewTimer(wait)
		defer deadline.Stop()
		var until time.Time
		for st, until = h.src.snapshot().at(time.Now()); match == st.ETag(); st, until = h.src.snapshot().at(time.Now()) {
			var leaseEnd <-chan time.Time
			if !until.IsZero() {
				t := time.NewTimer(time.Until(until)) // a lease that ends changes the state
				defer t.Stop()
				leaseEnd = t.C
			}
			select {
			case <-changed:
			case <-leaseEnd:
			case <-deadline.C:
				w.Header().Set("ETag", match)
				w.WriteHeader(http.StatusNotModified)
				return
			case <-r.Context().Done():
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", st.ETag())
	json.NewEncoder(w).Encode(st)
}
