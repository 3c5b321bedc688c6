package observer

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
	"github.com/baton-election/baton/services/observer/internal/membership"
)

// resultBadSignature is the result label of a message dropped because it
// is not signed by the member it names (or of a cluster without keys in
// OBSERVER_KEYS_DIR).
const resultBadSignature = "bad_signature"

// resultBadCertificate is the result label of a byzantine announcement
// dropped because its certificate is missing or does not hold under the
// cluster's keys (or the cluster has no keys to check it with).
const resultBadCertificate = "bad_certificate"

// resultRefused is the result label of a message dropped because its
// cluster would be one more than OBSERVER_MAX_CLUSTERS.
const resultRefused = "refused"

// metrics are the observer's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg           *prometheus.Registry
	changes       *prometheus.CounterVec
	gaps          *prometheus.HistogramVec
	gapSeconds    *prometheus.CounterVec
	leaderless    *prometheus.GaugeVec
	term          *prometheus.GaugeVec
	leader        *prometheus.GaugeVec
	splits        *prometheus.CounterVec
	announcements *prometheus.CounterVec
	live          *prometheus.CounterVec
	compacted     *prometheus.CounterVec
	// dropped counts the split brains and faulty members dropped for
	// the caps of the history (history.MaxSplitBrains, MaxFaulty).
	dropped *prometheus.CounterVec
	streams prometheus.Gauge
	// streamsRefused counts event streams refused for the limit.
	streamsRefused prometheus.Counter
	events         *prometheus.CounterVec
	resyncs        *prometheus.CounterVec
	// evidence counts the members recorded as faulty, with their proof.
	evidence *prometheus.CounterVec
	// flaps counts the leaderships that became flaps.
	flaps *prometheus.CounterVec
	// members is the number of members present per cluster with
	// dynamic membership.
	members *prometheus.GaugeVec
	// memberChanges counts the joins and leaves, by event and reason.
	memberChanges *prometheus.CounterVec
	// membersRefused counts the joins refused for the bounds on what the
	// observer follows.
	membersRefused *prometheus.CounterVec
	// clustersRefused counts the messages dropped because their cluster
	// would be one more than OBSERVER_MAX_CLUSTERS, by source.
	clustersRefused *prometheus.CounterVec
	// recordLag is the delay from an announcement's at to its record.
	recordLag prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_leader_changes_total",
			Help: "Leaderships recorded by this process, per cluster.",
		}, []string{"cluster"}),
		gaps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "observer_leaderless_gap_seconds",
			Help:    "How long a cluster had no leader before a new one, per closed gap whose start the observer saw.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30, 60, 300},
		}, []string{"cluster"}),
		gapSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_leaderless_seconds_total",
			Help: "Sum of the closed leaderless gaps recorded by this process, per cluster.",
		}, []string{"cluster"}),
		leaderless: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "observer_cluster_leaderless",
			Help: "1 while the cluster's latest leadership has ended and no new leader is announced, else 0.",
		}, []string{"cluster"}),
		term: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "observer_leader_term",
			Help: "Term of the cluster's latest leadership.",
		}, []string{"cluster"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "observer_leader_id",
			Help: "Node ID of the cluster's latest leader.",
		}, []string{"cluster"}),
		splits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_split_brain_events_total",
			Help: "Split-brain events detected by this process, per cluster and reason (same_term, stale_leader).",
		}, []string{"cluster", "reason"}),
		announcements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_announcements_total",
			Help: "Announcements read from the stream, by result: recorded, duplicate (redelivered), invalid, bad_signature, bad_certificate (byzantine).",
		}, []string{"result"}),
		live: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_live_messages_total",
			Help: "Live messages (leader, heartbeat, resign, propose, bz_evidence, presence, the other broadcasts of clusters with members, connection events, query answers) by kind and result: ok, invalid, bad_signature (also forged or uncheckable evidence), bad_certificate (byzantine announcements), dropped (inbox full).",
		}, []string{"kind", "result"}),
		compacted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_history_compacted_total",
			Help: "Leaderships dropped from the history by compaction (OBSERVER_KEEP), per cluster.",
		}, []string{"cluster"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_history_records_dropped_total",
			Help: "Records dropped from the history to keep it within its caps, the oldest first, per cluster and kind: split (over 1000 split brains), faulty (over 128 faulty members), member (over 10000 member events).",
		}, []string{"cluster", "kind"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "observer_event_streams",
			Help: "Clients connected to the event stream GET /api/events.",
		}),
		streamsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "observer_event_streams_refused_total",
			Help: "Event streams (GET /api/events and the page's GET /events) refused with 503 because OBSERVER_MAX_STREAMS were open.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_events_total",
			Help: "Events published to the event stream GET /api/events, by event name.",
		}, []string{"event"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_event_stream_resyncs_total",
			Help: "resync events sent on GET /api/events, by reason: behind (the client fell behind the buffer), unknown_id (a Last-Event-ID this process did not issue).",
		}, []string{"reason"}),
		evidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_evidence_recorded_total",
			Help: "Members of byzantine clusters recorded as faulty by this process, each with the evidence of its lie (two contradicting statements signed with its key), per cluster.",
		}, []string{"cluster"}),
		flaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_flaps_total",
			Help: "Leaderships recorded by this process that became flaps, per cluster: the leader before took back office less than 1 s after the flap's leader started.",
		}, []string{"cluster"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "observer_cluster_members",
			Help: "Members present now in a cluster with dynamic membership, as the observer sees them (0 for a static cluster).",
		}, []string{"cluster"}),
		memberChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_membership_changes_total",
			Help: "Members that joined (reason presence) or left (reason resign, disconnected, silent) a cluster with dynamic membership, seen by this process, per cluster.",
		}, []string{"cluster", "event", "reason"}),
		membersRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_membership_refused_total",
			Help: "Joins refused because the observer follows as many as it may, by limit: members (1024 in one cluster), clusters (1024 clusters with members).",
		}, []string{"limit"}),
		clustersRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "observer_clusters_refused_total",
			Help: "Messages dropped because their cluster would be one more than the observer follows (OBSERVER_MAX_CLUSTERS), by source: stream (announcements), live (the other messages).",
		}, []string{"source"}),
		recordLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "observer_record_lag_seconds",
			Help:    "Delay from an announcement's at (the new leader's clock) to its record in the history (written and synced, the observer's clock), per leadership recorded; 0 when the clocks put the record first.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600},
		}),
	}
	m.reg.MustRegister(m.changes, m.flaps, m.evidence, m.gaps, m.gapSeconds, m.leaderless, m.term, m.leader, m.splits, m.announcements, m.live, m.compacted, m.dropped,
		m.streams, m.streamsRefused, m.events, m.resyncs, m.members, m.memberChanges, m.membersRefused, m.clustersRefused, m.recordLag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series that does not depend on a cluster exists from the
	// start, at zero, so that rates and increase() alerts see zero rather
	// than nothing.
	for _, r := range []string{"recorded", "duplicate", "invalid", resultBadSignature, resultBadCertificate, resultRefused} {
		m.announcements.WithLabelValues(r)
	}
	for _, kind := range slices.Concat(liveKinds, memberKinds, []string{kindConnection, protocol.KindQuery, protocol.KindBatch, protocol.KindBeat}) {
		for _, r := range []string{"ok", "invalid", resultBadSignature, resultBadCertificate, "dropped", resultRefused} {
			m.live.WithLabelValues(kind, r)
		}
	}
	for _, name := range streamEventNames {
		m.events.WithLabelValues(name)
	}
	for _, reason := range []string{resyncBehind, resyncUnknownID} {
		m.resyncs.WithLabelValues(reason)
	}
	for _, limit := range []string{refusedMembers, refusedClusters} {
		m.membersRefused.WithLabelValues(limit)
	}
	for _, source := range []string{sourceStream, sourceLive} {
		m.clustersRefused.WithLabelValues(source)
	}
	return m
}

// followed registers the gauges of the clusters followed: how many, and
// the bound.
func (m *metrics) followed(max, count func() int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "observer_clusters",
			Help: "Clusters the observer follows: those with a history, and those only heard live so far.",
		}, func() float64 { return float64(count()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "observer_clusters_max",
			Help: "The most clusters the observer follows (OBSERVER_MAX_CLUSTERS); a message of one more is refused.",
		}, func() float64 { return float64(max()) }),
	)
}

// memberChangeLabels are the event and reason labels of
// observer_membership_changes_total.
var memberChangeLabels = []struct {
	event  membership.Event
	reason membership.Reason
}{
	{membership.Joined, membership.ReasonPresence},
	{membership.Left, membership.ReasonResign},
	{membership.Left, membership.ReasonDisconnected},
	{membership.Left, membership.ReasonSilent},
}

// known creates, at zero, the series every cluster has: called whenever
// the cluster's state is set, it makes them exist from the moment the
// cluster is first known. The term and leader gauges stay at 0 while the
// cluster has no leadership (only split brains seen).
//
// The series of what only some clusters see (member events, faulty
// members, records dropped for the caps, compaction) are created by
// kinds, from the cluster's first record of their kind: with thousands
// of clusters, a series costs a few hundred bytes each, and most
// clusters never see most kinds.
func (m *metrics) known(cluster string) {
	m.changes.WithLabelValues(cluster)
	m.gaps.WithLabelValues(cluster)
	m.gapSeconds.WithLabelValues(cluster)
	m.leaderless.WithLabelValues(cluster)
	m.term.WithLabelValues(cluster)
	m.leader.WithLabelValues(cluster)
	m.flaps.WithLabelValues(cluster)
	for _, r := range []string{history.SplitSameTerm, history.SplitStaleLeader} {
		m.splits.WithLabelValues(cluster, r)
	}
}

// kinds creates, at zero, the series of cluster that follow the kinds of
// record its history c holds: the split brains, faulty members and
// member events dropped for the caps, from the first of their kind; the
// evidence recorded, from the first faulty member; the members present
// and their joins and leaves, from the first member event (a cluster
// with dynamic membership); the leaderships compacted, from the first
// compaction.
func (m *metrics) kinds(cluster string, c *history.Cluster) {
	if len(c.SplitBrains) > 0 {
		m.dropped.WithLabelValues(cluster, string(history.KindSplit))
	}
	if len(c.Faulty) > 0 {
		m.dropped.WithLabelValues(cluster, string(history.KindFaulty))
		m.evidence.WithLabelValues(cluster)
	}
	if len(c.Membership) > 0 {
		m.membership(cluster)
	}
	if c.Floor > 0 {
		m.compacted.WithLabelValues(cluster)
	}
}

// membership creates, at zero, the member series of cluster.
func (m *metrics) membership(cluster string) {
	m.dropped.WithLabelValues(cluster, string(history.KindMember))
	m.members.WithLabelValues(cluster)
	for _, l := range memberChangeLabels {
		m.memberChanges.WithLabelValues(cluster, string(l.event), string(l.reason))
	}
}

// state sets the gauges of cluster from its history c.
func (m *metrics) state(cluster string, c *history.Cluster) {
	m.known(cluster)
	m.kinds(cluster, c)
	l, ok := c.Latest()
	if !ok {
		return
	}
	m.term.WithLabelValues(cluster).Set(float64(l.Term))
	m.leader.WithLabelValues(cluster).Set(float64(l.Leader))
	leaderless := 0.0
	if l.Ended() {
		leaderless = 1
	}
	m.leaderless.WithLabelValues(cluster).Set(leaderless)
}

// recorded counts what was just recorded for cluster, whose history is
// now c.
func (m *metrics) recorded(cluster string, kept []history.Record, c *history.Cluster) {
	m.state(cluster, c)
	for _, r := range kept {
		switch r.Kind {
		case history.KindLeader:
			m.changes.WithLabelValues(cluster).Inc()
			if i, ok := c.Index(r.Term); ok {
				if gap, known := c.GapBefore(i); known {
					m.gaps.WithLabelValues(cluster).Observe(gap.Seconds())
					m.gapSeconds.WithLabelValues(cluster).Add(gap.Seconds())
				}
				m.flaps.WithLabelValues(cluster).Add(float64(len(c.NewFlaps(i))))
			}
		case history.KindSplit:
			m.splits.WithLabelValues(cluster, r.Reason).Inc()
		case history.KindFaulty:
			m.evidence.WithLabelValues(cluster).Inc()
		}
	}
}
