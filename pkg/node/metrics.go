package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Metrics are a node's Prometheus metrics, in a registry of their own so
// that several nodes can run in one process (NewMetrics). The node's
// transport counts on them too: they are its transport.Meter and
// natstransport.Meter.
type Metrics struct {
	registry          *prometheus.Registry
	electionsStarted  prometheus.Counter
	sent              *prometheus.CounterVec
	received          *prometheus.CounterVec
	dropped           *prometheus.CounterVec
	leaderChanges     prometheus.Counter
	leaderTimeouts    prometheus.Counter
	steppedDown       prometheus.Counter
	membersLied       prometheus.Counter
	signatureChecks   prometheus.Counter
	unreachable       prometheus.Counter
	term              prometheus.Gauge
	connectionEvents  prometheus.Gauge
	leaderDisconnects prometheus.Counter
	membership        *prometheus.CounterVec
	peerDisconnects   prometheus.Counter
	leaderFlaps       prometheus.Counter // flaps.go
	suspicions        *prometheus.CounterVec
	probes            *prometheus.CounterVec
	resumed           prometheus.Counter
	withheld          *prometheus.CounterVec
	timerLag          prometheus.Histogram
	loopLag           prometheus.Histogram
	stateWrite        prometheus.Histogram
}

// Help of the metrics that read a node (a Group's read its elections).
const (
	helpInboxPending      = "Events waiting in the node's two lanes for the loop."
	helpIsLeader          = "1 while this node leads (under a lease, while the lease holds), 0 otherwise; with several elections, the number it leads."
	helpSubscriptionDrops = "Messages NATS dropped before the node read them, because a subscription's pending limits were reached."
)

// leads reports whether the node leads now (under a lease, while it
// holds).
func (n *Node) leads() bool { return n.Status().State == election.Leader.String() }

// subscriptionDrops is how many messages NATS dropped for the node's
// subscriptions; 0 off NATS.
func (n *Node) subscriptionDrops() int {
	if d, ok := n.tr.(interface{ SubscriptionDrops() int }); ok {
		return d.SubscriptionDrops()
	}
	return 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Received, Dropped (transport.Meter), EventsDelivered, PeerDisconnected
// and SignatureChecked (natstransport.Meter) count for the transport.
func (m *Metrics) Received(t protocol.Type)  { m.received.WithLabelValues(string(t)).Inc() }
func (m *Metrics) Dropped(r protocol.Reason) { m.dropped.WithLabelValues(string(r)).Inc() }
func (m *Metrics) EventsDelivered()          { m.connectionEvents.Set(1) }
func (m *Metrics) PeerDisconnected()         { m.peerDisconnects.Inc() }
func (m *Metrics) SignatureChecked()         { m.signatureChecks.Inc() }

// lagBuckets are the buckets of the lateness histograms, in seconds: from
// a millisecond to beyond the default leader time-out.
var lagBuckets = []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2}

// NewMetrics returns the metrics of one node (Deps.Metrics), or of a
// Group's elections.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		electionsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_elections_started_total",
			Help: "Elections this node entered: it became a candidate, or claimed a new term straight away.",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_messages_sent_total",
			Help: "Election messages published, by type.",
		}, []string{"type"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_messages_received_total",
			Help: "Valid election messages received and queued for the algorithm, by type.",
		}, []string{"type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_messages_dropped_total",
			Help: "Messages received and dropped, by reason.",
		}, []string{"reason"}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_leader_changes_total",
			Help: "Times this node learned of a new leadership (another leader, or a new term).",
		}),
		leaderTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_leader_timeouts_total",
			Help: "Times this node, as a follower, stopped hearing its leader and suspected it.",
		}),
		steppedDown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_stepped_down_total",
			Help: "Times this node stopped leading on its own: its lease ran out, or it handed over (Paxos).",
		}),
		membersLied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_members_lied_total",
			Help: "Members this node convicted of lying (byzantine): it holds two contradicting statements signed by each.",
		}),
		signatureChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_signature_checks_total",
			Help: "Ed25519 signatures this node checked: each signed message's, and (byzantine) each of the votes, time-outs, certificates and evidence it reads.",
		}),
		unreachable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_peers_unreachable_total",
			Help: "Point-to-point messages that found no subscriber (NATS no responders).",
		}),
		connectionEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "election_connection_events",
			Help: "1 once the NATS server has delivered a connection event (of any client of the account, or of the start-up probe): closed connections are noticed at once; 0 while failures are detected by heartbeats alone.",
		}),
		leaderDisconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_leader_disconnects_total",
			Help: "Times this node, as a follower, stopped following its leader because a connection event reported the leader's connection closed.",
		}),
		membership: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_membership_changes_total",
			Help: "With dynamic membership, members this node counted as joined or left, by change: joined, left.",
		}, []string{"change"}),
		peerDisconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_peer_disconnects_total",
			Help: "Connection events that reported a member's connection closed.",
		}),
		suspicions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_suspicions_total",
			Help: "Times this node gave up on its leader, by reason: leader_silent (its time-out, this node on time), node_late (its time-out while this node was late itself), connection_closed (a connection event), beats_lost (the beats of the leader's process stopped, with several elections).",
		}, []string{"reason"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_leader_probes_total",
			Help: "Probes of a leader this node had not heard for a while, sent before suspecting it, by outcome: sent, answered (the leader was heard again before the time-out).",
		}, []string{"outcome"}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_leaderships_resumed_total",
			Help: "Times this Paxos node, its lease lapsed, led on in the same term once a majority accepted it again.",
		}),
		withheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "election_deadlines_withheld_total",
			Help: "Deadlines this node reached late and withheld for a heartbeat interval, by outcome: heard (something came in that moved it, such as the leader's heartbeat), expired (it was then applied).",
		}, []string{"outcome"}),
		timerLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "election_timer_lag_seconds",
			Help:    "How late the loop's timer fired against its schedule (the machine's next deadline).",
			Buckets: lagBuckets,
		}),
		loopLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "election_loop_lag_seconds",
			Help:    "Time from an event's arrival on the lanes to its handling by the loop.",
			Buckets: lagBuckets,
		}),
		stateWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "election_state_write_seconds",
			Help:    "Duration of each write of the state (state.json, or a group's journal), with its fsyncs.",
			Buckets: lagBuckets,
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "election_term",
			Help: "Term of the leadership this node last accepted or claimed.",
		}),
	}
	m.registry.MustRegister(m.electionsStarted, m.sent, m.received, m.dropped,
		m.leaderChanges, m.leaderTimeouts, m.steppedDown, m.membersLied, m.signatureChecks, m.unreachable, m.term, m.connectionEvents, m.peerDisconnects, m.leaderDisconnects,
		m.membership, m.suspicions, m.probes, m.resumed, m.withheld, m.timerLag, m.loopLag, m.stateWrite)
	// Every label value exists from the start, so a rate is defined before
	// the first event.
	for _, t := range protocol.Types {
		m.sent.WithLabelValues(string(t))
		m.received.WithLabelValues(string(t))
	}
	for _, r := range protocol.Reasons {
		m.dropped.WithLabelValues(string(r))
	}
	for _, r := range []string{suspectSilent, suspectLate, suspectClosed, suspectBeatsLost} {
		m.suspicions.WithLabelValues(r)
	}
	for _, o := range []string{probeSent, probeAnswered} {
		m.probes.WithLabelValues(o)
	}
	for _, o := range []string{withheldHeard, withheldExpired} {
		m.withheld.WithLabelValues(o)
	}
	m.dropped.WithLabelValues(string(ReasonInboxFull))
	m.dropped.WithLabelValues(string(ReasonReplyNotInbox))
	m.dropped.WithLabelValues(string(ReasonSenderLimit))
	m.leaderFlaps = newFlapsCounter(m.registry)
	return m
}
