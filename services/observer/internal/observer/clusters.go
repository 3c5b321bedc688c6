package observer

import (
	"sync/atomic"
	"time"
)

// The clusters the observer follows are bounded (Config.MaxClusters,
// OBSERVER_MAX_CLUSTERS): what it keeps per cluster is bounded (the
// history by OBSERVER_KEEP and the caps of package history, the nodes
// followed live by package recorder, the members by package membership),
// so bounding their number bounds the whole.
//
// A cluster is followed once it has a history, or once a live message of
// it was accepted (a leader's heartbeats may come before the stream
// delivers its announcement), or once an announcement of it was accepted
// that waits, with the others of its batch, to be written: those are the
// clusters the recorder keeps state for. A message of a cluster not followed, when MaxClusters are
// already, is dropped before it creates anything: an announcement from
// the stream is acknowledged (it is not redelivered) and counted as
// refused in observer_announcements_total; every such message counts in
// observer_clusters_refused_total, and a warning is logged, at most once
// a refusedLogEvery.
//
// The clusters the history holds at the start stay followed, even beyond
// the bound (a lower OBSERVER_MAX_CLUSTERS does not forget a history).

// refusedLogEvery is how often, at most, the observer logs that it
// refuses clusters.
const refusedLogEvery = time.Minute

// Sources of a refused message, the source label of
// observer_clusters_refused_total.
const (
	sourceStream = "stream"
	sourceLive   = "live"
)

// followed is the bound's bookkeeping, owned by the owner goroutine but
// for count, which the metrics and the API read.
type followed struct {
	// liveOnly are the clusters followed for a live message that have no
	// history yet.
	liveOnly map[string]struct{}
	// unwritten are the clusters admitted for an announcement from the
	// stream whose records are not written yet: record admits a batch of
	// announcements, then writes them together (wrote).
	unwritten map[string]struct{}
	// count is the number of clusters followed, as last computed.
	count atomic.Int64
	// refusedLogged is when the last warning was logged; refusedSince
	// counts the messages refused since.
	refusedLogged time.Time
	refusedSince  uint64
}

// admit reports whether the observer follows cluster, or may start to:
// false when it follows Config.MaxClusters already, and then the message
// of source is counted and the refusal logged. Only the owner goroutine
// calls it, before a message of cluster changes anything.
//
// With member keys, a cluster without keys is admitted without being
// followed: its messages are refused for their signature, and create
// nothing.
func (o *Observer) admit(cluster, source string) bool {
	if o.cfg.Keys != nil && o.cfg.Keys[cluster] == nil {
		return true
	}
	f := &o.followed
	if _, ok := f.liveOnly[cluster]; ok {
		if o.store.Has(cluster) {
			// Heard live first, it has a history now: count it once.
			delete(f.liveOnly, cluster)
			o.followedCount()
		}
		return true
	}
	if _, ok := f.unwritten[cluster]; ok || o.store.Has(cluster) {
		return true
	}
	n := o.followedCount()
	if n >= o.cfg.MaxClusters {
		// Clusters heard live first may have a history by now.
		for name := range f.liveOnly {
			if o.store.Has(name) {
				delete(f.liveOnly, name)
			}
		}
		n = o.followedCount()
	}
	if n >= o.cfg.MaxClusters {
		o.refuse(cluster, source, n)
		return false
	}
	if source == sourceLive {
		if f.liveOnly == nil {
			f.liveOnly = map[string]struct{}{}
		}
		f.liveOnly[cluster] = struct{}{}
	} else {
		if f.unwritten == nil {
			f.unwritten = map[string]struct{}{}
		}
		f.unwritten[cluster] = struct{}{}
	}
	f.count.Store(int64(n + 1))
	return true
}

// followedCount counts the clusters followed, and notes it for the
// metrics and the API.
func (o *Observer) followedCount() int {
	n := o.store.Count() + len(o.followed.liveOnly) + len(o.followed.unwritten)
	o.followed.count.Store(int64(n))
	return n
}

// wrote ends the admissions of a batch of announcements once its records
// are written, or failed to be: the clusters have a history now, or are
// admitted again when their announcements come again.
func (o *Observer) wrote() {
	clear(o.followed.unwritten)
	o.followedCount()
}

// refuse counts and logs a message of cluster refused for the bound.
func (o *Observer) refuse(cluster, source string, followed int) {
	o.metrics.clustersRefused.WithLabelValues(source).Inc()
	f := &o.followed
	f.refusedSince++
	now := o.now()
	if !f.refusedLogged.IsZero() && now.Sub(f.refusedLogged) < refusedLogEvery {
		return
	}
	o.log.Warn("refusing a cluster: the observer follows as many as OBSERVER_MAX_CLUSTERS allows; its messages are dropped and counted in observer_clusters_refused_total",
		"cluster", cluster, "max_clusters", o.cfg.MaxClusters, "followed", followed, "refused_messages", f.refusedSince)
	f.refusedLogged, f.refusedSince = now, 0
}

// clustersFollowed returns how many clusters the observer follows, as
// its owner goroutine last counted them (or the history's clusters,
// before it ran).
func (o *Observer) clustersFollowed() int {
	if n := o.followed.count.Load(); n > 0 {
		return int(n)
	}
	if o.store != nil {
		return o.store.Count()
	}
	return 0
}
