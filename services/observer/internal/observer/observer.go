// Package observer records every leadership of every election cluster on
// one NATS and serves it: a JSON API, Prometheus metrics and a live page.
//
// # Where the history comes from
//
// Announcements (election.<cluster>.leader) are captured by a JetStream
// stream that the observer creates or updates on start (Config.Stream,
// subjects election.*.leader, file storage), and read through a durable
// consumer (Config.Consumer) with explicit acks. A message is acknowledged
// only after its record is fsynced to the history files, so announcements
// made while the observer is down or restarting are recorded when it comes
// back, as long as NATS kept the stream. Redelivered messages are dropped
// by the history's (cluster, term) rule. A message whose record cannot be
// written (a full disk) is not acknowledged, and comes again; the history
// files keep whole lines only. If the consumer is lost (deleted, or its
// stream deleted and created again), the observer sets it up again,
// resuming after the last announcement it recorded, and reports itself
// unhealthy meanwhile.
//
// A leadership announced before the stream first existed (nodes started
// before the observer ever ran) is learnt from its leader instead: when
// heartbeats carry a term the history still does not hold after
// missingGrace (time enough for the stream to deliver what it has), the
// observer asks on the cluster's query subject, and the leader's answer,
// its original announcement, is recorded like one from the stream.
//
// Heartbeats, resigns and announcements are also watched live with core
// subscriptions, and never stored one by one: they tell the observer when
// a leader was last heard from (the end of its leadership, hence the gap
// before the next) and whether two nodes acted as leader at once.
//
// # Members that come and go
//
// In a cluster with dynamic membership the observer also follows which
// members are present: a member joins with its first presence broadcast
// (election.<cluster>.presence), any broadcast of it refreshes it, and it
// leaves when it resigns, when the NATS server reports its connection
// closed (the connection events of internal/natsconf, where the
// observer's account receives them), or after OBSERVER_MEMBER_TIMEOUT of
// silence. The rules are in package membership; members.go is their
// edge, with the one check of who sent a member's message or connection
// (memberVerifier). Joins and leaves are member events of the cluster's
// history, served by GET /api/clusters/{cluster}/membership; the members
// present now, by GET /api/clusters/{cluster}/members.
//
// # Recorder and edges
//
// The rules (how a leadership ends, silence, gaps, split brain, which
// missing term to ask for) are in package recorder, a pure state machine
// fed with checked messages and the time. This package is its edges: the
// NATS ingest (the stream consumer, the live subscriptions, the query for
// missing terms), the owner goroutine that hands the recorder its inputs
// and writes what it returns to the history, and HTTP: the JSON API, the
// event stream GET /api/events, the page and the metrics. The API is
// documented in docs/observer-api.md.
//
// # What one client can hold
//
// A request reads the history in place under a read lock and copies only
// what it answers (a page, the current leadership, what the page shows),
// so its cost does not grow with the history. The HTTP server times out
// slow requests, slow answers and idle connections. At most
// Config.MaxStreams event streams (both kinds) are open at once; each
// ends after streamLifetime, when its client stops taking what is written
// within streamWriteTimeout, or when the observer shuts down.
//
// # What is not guaranteed
//
// Ends and gaps are as the observer saw them: a leader that died while the
// observer was down ends "unobserved", with no known gap after it. Split
// brain is detected only while the observer watches, and only between
// nodes whose heartbeats reach its NATS. With member keys (Config.Keys,
// OBSERVER_KEYS_DIR), the observer checks that announcements, heartbeats,
// renewals and resignations are signed by the member they name, and drops
// what fails; without them, anyone who can publish on
// the election subjects can fake liveness or split brain in the
// observer's view (never in the nodes'). Whoever sends, what the
// observer keeps is bounded: terms outside the protocol's bounds are
// dropped, the recorder follows a bounded number of nodes, and the
// history caps split brains and faulty members per cluster, the oldest
// dropped first and counted (observer_history_records_dropped_total).
// The clusters followed are bounded too (Config.MaxClusters, see
// clusters.go): a message of one more is dropped and counted
// (observer_clusters_refused_total).
//
// # Byzantine clusters
//
// The observer knows each cluster's algorithm from its keys file (its
// "#: algorithm" statement), never from an announcement: an announcement
// of another algorithm is dropped, and a byzantine cluster's leader is
// recorded only if its announcement carries a certificate that holds under
// the cluster's keys, whatever algorithm it names
// (signing.ReadAnnouncement). Of a keys file that states no algorithm,
// only certified announcements are recorded. Without keys for the
// cluster, no byzantine leader is. A cluster whose keys file states
// "#: algorithm byzantine" is byzantine for the live messages too
// (Observer.byzantine): a leader acts only through rounds or
// announcements that carry its certificate, and heartbeats and Paxos
// proposals, signed by their sender alone, are refused, so that a liar
// with its own key makes no split brain and no record. The
// observer also listens to the evidence the members broadcast
// (election.<cluster>.bz_evidence): a message sent and signed by a member
// whose two statements contradict each other and are both signed with
// the key of the member they convict (certify.VerifyEvidence). That
// member is recorded as faulty, once, with the proof, in the history; the
// proof convicts whoever relays it, so nothing else is trusted. Evidence
// of a cluster without keys cannot be checked and is dropped.
package observer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
	"github.com/baton-election/baton/services/observer/internal/membership"
	"github.com/baton-election/baton/services/observer/internal/recorder"
)

// liveInbox bounds the live messages waiting for the owner goroutine; more
// are dropped and counted, never blocking NATS delivery.
const liveInbox = 4096

// liveKinds are the kinds of subjects the observer follows live besides
// the stream: leader announcements (for the order of events), heartbeats,
// resigns, Paxos proposals (a leader's lease renewals), the byzantine
// leaders' certified renewals, the evidence of the byzantine members'
// lies and the presence of the members of clusters with dynamic
// membership. It reads memberKinds too, for those clusters only.
var liveKinds = []string{protocol.KindLeader, protocol.KindHeartbeat, protocol.KindResign, protocol.KindPropose, kindBzPropose, protocol.KindEvidence, protocol.KindPresence}

// kindBzPropose is the subject kind of the byzantine leader's rounds.
var kindBzPropose = string(protocol.TypeBzPropose)

// maxLive bounds a live message the inbox takes: the largest that any
// kind may be (a byzantine message, an announcement with a certificate).
// A larger one is dropped as invalid before it is queued.
const maxLive = protocol.MaxCertifiedPayload

// missingGrace is how long a term heard in heartbeats may stay unrecorded
// before the observer asks its leader for the announcement: long enough
// for the stream to deliver its backlog first, so that leaderships are
// recorded in order.
const missingGrace = 2 * time.Second

// setupRetry is how long Run waits before it tries again to create the
// stream and the consumer.
const setupRetry = time.Second

// Observer watches the clusters and serves what it recorded.
type Observer struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics
	hub     *hub
	// feed holds the events of GET /api/events.
	feed *feed
	// streamKeepAlive and streamWriteTimeout time the event streams:
	// the comment sent while idle, the longest a write may block.
	streamKeepAlive, streamWriteTimeout time.Duration
	// streamLifetime is the longest an event stream stays open.
	streamLifetime time.Duration
	// streamSlots holds a token per open event stream, of either kind;
	// its capacity is Config.MaxStreams.
	streamSlots chan struct{}
	// httpTimeouts bound what a connection may hold of the HTTP server.
	httpTimeouts httpTimeouts

	// Set once by Run before anything reads them.
	store *history.Store
	addr  string
	ready chan struct{}

	// connectedAt is when the NATS connection was last (re)established,
	// in Unix nanoseconds; 0 while disconnected.
	connectedAt atomic.Int64
	// consuming is true while the durable consumer is set up.
	consuming atomic.Bool
	// cursor is where a durable consumer created again starts.
	cursor cursor
	// deferred, while a batch of live messages is observed (batch), holds
	// the records its messages wrote, for one sync (flushWrites); nil
	// otherwise. Only the owner goroutine uses it.
	deferred  []history.Batch
	deferring bool

	// ask requests the current leader's announcement of a cluster; the
	// answer arrives as a liveMsg with queried set. Set once by Run.
	ask func(cluster string)

	// verified remembers, per cluster with keys, the certificates that
	// held: a byzantine leader's every round carries the same one, and
	// its quorum's signatures are checked once. Set by New.
	verified map[string]*certify.Verified

	// verify checks who sent the members' messages and connections
	// (members.go). Set by New.
	verify memberVerifier
	// members are the members present in the clusters with dynamic
	// membership: changed by the owner goroutine, read by HTTP requests,
	// under membersMu.
	membersMu sync.RWMutex
	members   *membership.Tracker
	// expiry is the timer of the next member's silence, owned by the
	// owner goroutine; nil until it runs.
	expiry *memberExpiry
	// followed bounds the clusters followed (clusters.go).
	followed followed
}

// verifiedCertificates is how many certificates the observer remembers
// per cluster: the current term's, and those of the terms just before.
const verifiedCertificates = 8

// New returns an observer for cfg, which must be valid. It starts nothing.
func New(cfg Config, log *slog.Logger) *Observer {
	o := &Observer{
		cfg:     cfg,
		log:     log,
		now:     time.Now,
		metrics: newMetrics(),
		hub:     newHub(),
		// Event IDs of this run: its start time, in base 36.
		feed:               newFeed(feedSize, strconv.FormatInt(time.Now().UnixNano(), 36)),
		streamKeepAlive:    streamKeepAlive,
		streamWriteTimeout: streamWriteTimeout,
		streamLifetime:     streamLifetime,
		streamSlots:        make(chan struct{}, cfg.MaxStreams),
		httpTimeouts:       defaultHTTPTimeouts,
		ready:              make(chan struct{}),
		verified:           verifiedPerCluster(cfg.Keys),
		verify:             keysVerifier{keys: cfg.Keys},
		members:            membership.New(cfg.MemberTimeout),
	}
	o.metrics.followed(func() int { return o.cfg.MaxClusters }, o.clustersFollowed)
	return o
}

// verifiedPerCluster returns a certificate cache for each cluster of keys.
func verifiedPerCluster(keys map[string]*signing.MemberKeys) map[string]*certify.Verified {
	verified := make(map[string]*certify.Verified, len(keys))
	for cluster := range keys {
		verified[cluster] = certify.NewVerified(verifiedCertificates)
	}
	return verified
}

// httpTimeouts are the HTTP server's time-outs. They do not cut the event
// streams (see streamContext).
type httpTimeouts struct {
	// readHeader bounds reading a request's headers; read, the whole
	// request.
	readHeader, read time.Duration
	// write bounds writing a response, from the end of its request.
	write time.Duration
	// idle is how long a keep-alive connection may wait for its next
	// request before the server closes it.
	idle time.Duration
}

// defaultHTTPTimeouts: requests are small GETs; the largest answer, a page
// of 10000 leaderships, is a few megabytes.
var defaultHTTPTimeouts = httpTimeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 60 * time.Second}

// Listening is closed once the HTTP listener is bound and the history
// loaded; Addr is valid from then on.
func (o *Observer) Listening() <-chan struct{} { return o.ready }

// Addr is the address the HTTP server listens on.
func (o *Observer) Addr() string { return o.addr }

// liveMsg is a message of a core subscription, stamped on arrival.
type liveMsg struct {
	subject string
	data    []byte
	header  nats.Header // the signature
	at      time.Time
	// queried marks a leader's answer to the observer's query; subject is
	// then the observer's reply subject, whose last token is the cluster.
	queried bool
	// entry is, for a message that arrived in a batch, the message read
	// and checked against the batch's signature (batch); subject is then
	// the one it would have had on its own, and data and header are nil.
	entry *protocol.Message
}

// Run loads the history, serves HTTP, connects to NATS and records until
// ctx ends; then it stops consuming, shuts the HTTP server down and drains
// the connection. It returns an error only if it cannot start.
func (o *Observer) Run(ctx context.Context) error {
	store, err := history.Open(o.cfg.DataDir, o.log)
	if err != nil {
		return err
	}
	defer store.Close()
	o.store = store
	for _, name := range store.Clusters() {
		o.compact(name, 0)
		store.Read(name, func(c *history.Cluster) { o.metrics.state(name, c) })
	}
	o.restoreMembers()
	o.followedCount()

	ln, err := net.Listen("tcp", o.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("observer: listen on HTTP_ADDR: %w", err)
	}
	o.addr = ln.Addr().String()

	closed := make(chan struct{})
	nc, err := nats.Connect(o.cfg.NATS.Servers(), append(o.cfg.NATS.AuthOptions(),
		nats.Name("baton-observer"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ConnectHandler(func(*nats.Conn) { o.connected(true) }),
		nats.ReconnectHandler(func(*nats.Conn) { o.connected(true) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			o.connected(false)
			o.log.Warn("disconnected from NATS", "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
	)...)
	if err != nil {
		ln.Close()
		return fmt.Errorf("observer: connect to NATS_URL: %w", err)
	}
	if nc.IsConnected() {
		o.connected(true)
	}

	// Only the subjects the observer records: a subscription to every
	// subject would include each cluster's query subject, and a request
	// there for a cluster with no leader would wait for its time-out
	// instead of failing at once with "no responders". The messages of the
	// kinds go to one queue; their order across subjects does not matter
	// (terms order them).
	live := make(chan liveMsg, liveInbox)
	for _, kind := range slices.Concat(liveKinds, memberKinds, []string{protocol.KindBatch, protocol.KindBeat}) {
		members := slices.Contains(memberKinds, kind)
		limit := maxLive
		switch kind {
		case protocol.KindBatch:
			limit = protocol.MaxBatchPayload
		case protocol.KindBeat:
			limit = protocol.MaxBeatPayload
		}
		if _, err := nc.Subscribe(protocol.Root+".*."+kind, func(m *nats.Msg) {
			if members {
				// Only for the clusters with members: the others'
				// elections need not wait in the inbox.
				cluster, err := protocol.ClusterOf(m.Subject)
				if err != nil || !o.follows(cluster) && (kind != string(protocol.TypeBzHello) || !o.changingSet(cluster)) {
					return // a byzantine member's Hello may be its first presence
				}
			}
			if len(m.Data) > limit {
				o.metrics.live.WithLabelValues(kind, "invalid").Inc()
				return
			}
			select {
			case live <- liveMsg{subject: m.Subject, data: m.Data, header: m.Header, at: o.now()}:
			default:
				o.metrics.live.WithLabelValues(kind, "dropped").Inc()
			}
		}); err != nil {
			nc.Close()
			ln.Close()
			return fmt.Errorf("observer: subscribe: %w", err)
		}
	}

	// The NATS server's connection events, where the observer's account
	// receives them: a member's closed connection is a leave.
	for _, subject := range []string{connectSubject, disconnectSubject} {
		if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
			if len(m.Data) > maxConnEvent {
				o.metrics.live.WithLabelValues(kindConnection, "invalid").Inc()
				return
			}
			select {
			case live <- liveMsg{subject: m.Subject, data: m.Data, at: o.now()}:
			default:
				o.metrics.live.WithLabelValues(kindConnection, "dropped").Inc()
			}
		}); err != nil {
			nc.Close()
			ln.Close()
			return fmt.Errorf("observer: subscribe: %w", err)
		}
	}

	// Answers to the observer's queries for leaderships it missed.
	replies := nats.NewInbox()
	if _, err := nc.Subscribe(replies+".*", func(m *nats.Msg) {
		if len(m.Data) == 0 {
			return // "no responders": nobody leads now
		}
		select {
		case live <- liveMsg{subject: m.Subject, data: m.Data, header: m.Header, at: o.now(), queried: true}:
		default:
			o.metrics.live.WithLabelValues(protocol.KindQuery, "dropped").Inc()
		}
	}); err != nil {
		nc.Close()
		ln.Close()
		return fmt.Errorf("observer: subscribe: %w", err)
	}
	o.ask = func(cluster string) {
		if err := nc.PublishRequest(protocol.QuerySubject(cluster), replies+"."+cluster, nil); err != nil {
			o.log.Warn("cannot ask for the leader", "cluster", cluster, "err", err)
		}
	}

	srvCtx, stopSrv := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           o.routes(),
		ReadHeaderTimeout: o.httpTimeouts.readHeader,
		ReadTimeout:       o.httpTimeouts.read,
		WriteTimeout:      o.httpTimeouts.write,
		IdleTimeout:       o.httpTimeouts.idle,
		BaseContext:       func(net.Listener) context.Context { return srvCtx },
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			o.log.Error("HTTP server stopped", "err", err)
		}
	})
	anns := make(chan delivery, history.MaxApplyAll)
	wg.Go(func() { o.consume(ctx, nc, anns) })
	close(o.ready)
	o.log.Info("observer running", "http", o.addr, "nats", o.cfg.NATS.URL, "data", o.cfg.DataDir, "signed", o.cfg.Keys != nil)
	for _, cluster := range slices.Sorted(maps.Keys(o.cfg.Keys)) {
		if o.cfg.Keys[cluster].Algorithm() == "" {
			o.log.Warn("the cluster's keys state no algorithm (add \"#: algorithm <name>\" to its file in OBSERVER_KEYS_DIR, <cluster>.keys or a list of clusters that names it): only announcements with a certificate that holds are recorded",
				"cluster", cluster)
		}
	}
	if o.cfg.Keys == nil {
		o.log.Warn("no member keys (OBSERVER_KEYS_DIR): unsigned announcements and heartbeats are believed, and any NATS client can forge them")
	}

	o.loop(ctx, live, anns)

	// Shutdown: SSE streams end with srvCtx, the server drains its other
	// requests, the connection drains its subscriptions.
	stopSrv()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	if err := nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-shutdownCtx.Done():
			nc.Close()
		}
	} else {
		nc.Close()
	}
	wg.Wait()
	return nil
}

func (o *Observer) connected(up bool) {
	if up {
		o.connectedAt.Store(o.now().UnixNano())
	} else {
		o.connectedAt.Store(0)
	}
}

// loop is the owner goroutine: it feeds the recorder, and every change to
// the history happens here.
func (o *Observer) loop(ctx context.Context, live <-chan liveMsg, anns <-chan delivery) {
	rec := recorder.New(recorder.Config{Window: o.cfg.LeaderTimeout, Grace: o.cfg.SplitGrace, AskAfter: missingGrace}, o.store)
	ticker := time.NewTicker(o.cfg.LeaderTimeout / 2)
	defer ticker.Stop()
	missingTicker := time.NewTicker(missingGrace / 4)
	defer missingTicker.Stop()
	o.expiry = newMemberExpiry()
	defer o.expiry.timer.Stop()
	o.membersMu.RLock()
	restored := o.members.Next(o.now(), o.listening())
	o.membersMu.RUnlock()
	o.expiry.arm(restored, o.now())
	var lag time.Duration // how long the last live message handled had waited
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-anns:
			for next := &d; next != nil; {
				var batch []delivery
				batch, next = gather(*next, anns)
				o.record(rec, batch)
			}
		case m := <-live:
			lag = o.now().Sub(m.at)
			o.observe(rec, m)
		case <-ticker.C:
			if behind(lag, len(live), o.cfg.LeaderTimeout) {
				o.log.Debug("silences not checked: behind on the live messages", "lag", lag, "queued", len(live))
				continue
			}
			o.checkSilence(rec, o.now())
		case <-o.expiry.timer.C:
			o.expireMembers(o.now())
		case <-missingTicker.C:
			if o.ask != nil {
				for _, cluster := range rec.Missing(o.now()) {
					o.ask(cluster)
				}
			}
		}
	}
}

// behind reports whether the observer is behind on its live messages:
// some still wait, and the last one it handled had waited for more than
// a quarter of the failure-detection window. Then the leaders' latest
// heartbeats and beats may be among those waiting, and a silence it
// found would be its own: it checks none (checkSilence) until it has
// caught up, as a node behind on its connection reports no member
// silent.
func behind(lag time.Duration, queued int, window time.Duration) bool {
	return queued > 0 && lag > window/4
}

// gather returns first and the announcements queued behind it, up to
// history.MaxApplyAll of different clusters, without waiting; an
// announcement of a cluster already among them ends the batch, and is
// returned as the first of the next.
func gather(first delivery, anns <-chan delivery) ([]delivery, *delivery) {
	batch := []delivery{first}
	clusters := map[string]bool{}
	if c, err := protocol.ClusterOf(first.msg.Subject()); err == nil {
		clusters[c] = true
	}
	for len(batch) < history.MaxApplyAll {
		select {
		case d := <-anns:
			c, err := protocol.ClusterOf(d.msg.Subject())
			if err == nil && clusters[c] {
				return batch, &d
			}
			clusters[c] = true
			batch = append(batch, d)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// record writes announcements from the stream to the history, each
// ending the leadership before it, with one sync for them all
// (history.Store.ApplyAll), and acknowledges each once written; those
// invalid or refused are dropped for good. It notes each in the cursor,
// in the order delivered, before its acknowledgement, so that a consumer
// created again resumes after what is done.
func (o *Observer) record(rec *recorder.Recorder, ds []delivery) {
	type announced struct {
		cluster string
		a       protocol.Announcement
		batch   int // its batch of records; -1 if dropped
	}
	all := make([]announced, len(ds))
	var batches []history.Batch
	for i, d := range ds {
		all[i].batch = -1
		m := d.msg
		cluster, err := protocol.ClusterOf(m.Subject())
		var a protocol.Announcement
		if err == nil {
			a, err = o.readAnnouncement(cluster, m.Data(), m.Headers())
		}
		if err != nil {
			o.metrics.announcements.WithLabelValues(invalid(err)).Inc()
			o.log.Debug("dropping invalid announcement", "subject", m.Subject(), "err", err)
			continue
		}
		if !o.admit(cluster, sourceStream) {
			o.metrics.announcements.WithLabelValues(resultRefused).Inc()
			continue
		}
		all[i] = announced{cluster, a, len(batches)}
		batches = append(batches, history.Batch{Cluster: cluster, Records: rec.Announced(cluster, a, o.now())})
	}
	var kept [][]history.Record
	var err error
	if len(batches) > 0 {
		kept, err = o.store.ApplyAll(batches)
		o.wrote()
	}
	for i, d := range ds {
		t := all[i]
		switch {
		case t.batch < 0:
			d.note(&o.cursor, true)
			d.msg.Term() // dropped, and counted: never redeliver it
		case err != nil:
			o.log.Error("cannot record announcement; it will be redelivered", "cluster", t.cluster, "term", t.a.Term, "err", err)
			d.note(&o.cursor, false)
			d.msg.NakWithDelay(setupRetry)
		default:
			o.recorded(t.cluster, t.a, kept[t.batch])
			d.note(&o.cursor, true)
			if err := d.msg.Ack(); err != nil {
				o.log.Warn("ack failed; the announcement will be redelivered and dropped as a duplicate", "err", err)
			}
			o.changed(t.cluster, kept[t.batch])
		}
	}
}

// keysOf returns the member keys of cluster: nil without OBSERVER_KEYS_DIR,
// an error with ReasonSignature for a cluster it holds no keys for.
func (o *Observer) keysOf(cluster string) (*signing.MemberKeys, error) {
	return clusterKeys(o.cfg.Keys, cluster)
}

// clusterKeys returns the member keys of cluster in keys: nil if keys is,
// an error with ReasonSignature for a cluster it holds no keys for.
func clusterKeys(keys map[string]*signing.MemberKeys, cluster string) (*signing.MemberKeys, error) {
	if keys == nil {
		return nil, nil
	}
	k, ok := keys[cluster]
	if !ok {
		return nil, &protocol.ValidationError{Reason: protocol.ReasonSignature, Detail: "no member keys for cluster " + cluster}
	}
	return k, nil
}

// readAnnouncement reads an announcement of cluster; with keys, it must
// be signed by the leader it names.
func (o *Observer) readAnnouncement(cluster string, data []byte, h nats.Header) (protocol.Announcement, error) {
	keys, err := o.keysOf(cluster)
	if err != nil {
		return protocol.Announcement{}, err
	}
	return signing.ReadAnnouncement(keys, cluster, data, h)
}

// readMessage reads an election message of cluster received on subject;
// with keys, it must be signed by its sender, which is checked first
// (Observer.verify).
func (o *Observer) readMessage(cluster string, m liveMsg) (protocol.Message, error) {
	if m.entry != nil {
		return *m.entry, nil // read from its batch (batch)
	}
	return o.verify.Message(cluster, m.subject, m.data, m.header)
}

// invalid is the metric result of a message dropped for err.
func invalid(err error) string {
	switch {
	case protocol.ReasonOf(err) == protocol.ReasonSignature:
		return resultBadSignature
	case errors.Is(err, protocol.ErrUncertified), errors.Is(err, protocol.ErrNeedKeys):
		return resultBadCertificate
	}
	return "invalid"
}

// recordAnnouncement writes the records of announcement a to the history
// and counts it as recorded or duplicate.
func (o *Observer) recordAnnouncement(cluster string, a protocol.Announcement, recs []history.Record) ([]history.Record, error) {
	kept, err := o.store.Apply(cluster, recs...)
	if err != nil {
		return nil, err
	}
	o.recorded(cluster, a, kept)
	return kept, nil
}

// recorded counts announcement a, whose records kept were written, as
// recorded or duplicate, and compacts its cluster's history.
func (o *Observer) recorded(cluster string, a protocol.Announcement, kept []history.Record) {
	if len(kept) == 0 || kept[len(kept)-1].Kind != history.KindLeader {
		o.metrics.announcements.WithLabelValues("duplicate").Inc()
	} else {
		o.metrics.announcements.WithLabelValues("recorded").Inc()
		o.metrics.recordLag.Observe(max(0, o.now().Sub(a.At.Time)).Seconds())
		o.log.Info("leader", "cluster", cluster, "leader", a.Leader, "term", a.Term, "algorithm", a.Algorithm)
		o.compact(cluster, o.cfg.Keep/10)
	}
}

// compact drops the oldest leaderships of cluster once it holds more than
// OBSERVER_KEEP and slack. A failure leaves the history whole, and longer.
func (o *Observer) compact(cluster string, slack int) {
	keep := o.cfg.Keep
	if keep <= 0 || o.store.Len(cluster) <= keep+slack {
		return
	}
	n, err := o.store.Compact(cluster, keep)
	if err != nil {
		o.log.Warn("cannot compact the history; it keeps every leadership for now", "cluster", cluster, "err", err)
		return
	}
	o.metrics.compacted.WithLabelValues(cluster).Add(float64(n))
	o.log.Info("history compacted", "cluster", cluster, "dropped", n, "kept", keep)
}

// observe checks one live message and hands it to the recorder, then
// records what it reveals (split brain, a resign, a leader heard again).
func (o *Observer) observe(rec *recorder.Recorder, m liveMsg) {
	if m.queried {
		o.answered(rec, m)
		return
	}
	if strings.HasPrefix(m.subject, "$SYS.") {
		o.connection(m)
		return
	}
	parts := strings.Split(m.subject, ".")
	if len(parts) != 3 || protocol.ValidateCluster(parts[1]) != nil {
		return
	}
	cluster, kind := parts[1], parts[2]
	if kind == protocol.KindBatch && m.entry == nil {
		o.batch(rec, m)
		return
	}
	if kind == protocol.KindBeat {
		o.beat(rec, cluster, m)
		return
	}
	if !o.admit(cluster, sourceLive) {
		o.metrics.live.WithLabelValues(kind, resultRefused).Inc()
		return
	}
	switch {
	case kind == protocol.KindEvidence:
		o.evidence(cluster, m)
		return
	case kind == protocol.KindPresence:
		o.presence(cluster, m)
		return
	case slices.Contains(memberKinds, kind):
		o.memberBroadcast(cluster, kind, m)
		return
	}
	var node, term uint64
	var err error
	switch kind {
	case protocol.KindLeader:
		var a protocol.Announcement
		a, err = o.readAnnouncement(cluster, m.data, m.header)
		if err == nil {
			err = o.checkLiveAnnouncement(cluster, a)
		}
		node, term = a.Leader, a.Term
	case protocol.KindHeartbeat, protocol.KindResign, protocol.KindPropose:
		var msg protocol.Message
		msg, err = o.readMessage(cluster, m)
		if err == nil && (string(msg.Type) != kind || msg.From == 0 || msg.To != 0) {
			err = fmt.Errorf("%s message on %s", msg.Type, m.subject)
		}
		if err == nil {
			// Signed by its sender: a sign that the member is present,
			// or, for a resign, that it left.
			o.memberMessage(cluster, m.subject, msg, m.at)
			err = o.checkLive(cluster, kind, msg)
		}
		node, term = msg.From, msg.Term
		if err == nil && kind == protocol.KindHeartbeat && term == 0 {
			err = errors.New("heartbeat without a term")
		}
		if err == nil && kind == protocol.KindPropose {
			if msg.Candidate != msg.From {
				return // a proposal not yet accepted: no leader yet
			}
			// A Paxos leader's lease renewal is its heartbeat.
			kind = protocol.KindHeartbeat
		}
	case kindBzPropose:
		var msg protocol.Message
		msg, err = o.readMessage(cluster, m)
		if err == nil && (msg.Type != protocol.TypeBzPropose || msg.To != 0) {
			err = fmt.Errorf("%s message on %s", msg.Type, m.subject)
		}
		if err == nil {
			o.memberMessage(cluster, m.subject, msg, m.at)
			err = o.checkMessage(cluster, msg)
		}
		if err == nil && msg.Cert == nil {
			return // a round before the certificate: no leader yet
		}
		if err == nil {
			err = o.checkRenewal(cluster, msg)
		}
		if err != nil {
			o.metrics.live.WithLabelValues(kind, invalid(err)).Inc()
			o.log.Debug("dropping invalid message", "subject", m.subject, "err", err)
			return
		}
		// A certified leader's round is its heartbeat.
		node, term, kind = msg.From, msg.Term, protocol.KindHeartbeat
	}
	if err != nil {
		o.metrics.live.WithLabelValues(kind, invalid(err)).Inc()
		o.log.Debug("dropping invalid message", "subject", m.subject, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(kind, "ok").Inc()

	var recs []history.Record
	switch kind {
	case protocol.KindResign:
		recs = rec.Resigned(cluster, node, m.at)
	case protocol.KindLeader:
		recs = rec.HeardAnnouncement(cluster, node, term, m.at)
	case protocol.KindHeartbeat:
		recs = rec.HeardHeartbeat(cluster, node, term, m.at)
	}
	o.write(cluster, recs)
}

// batch observes each message of a batch that a member process with many
// elections published (protocol.ReadBatch) as if it had arrived on its
// own subject: checked against the batch's signature under its own
// cluster's keys, and then as any live message of its kind. A batch that
// does not read is counted invalid whole; a message that is not a
// broadcast, or of a kind the observer does not record, is skipped.
func (o *Observer) batch(rec *recorder.Recorder, m liveMsg) {
	o.deferring = true
	defer func() { o.deferring = false }()
	signers := make(map[string]batchSigner)
	conn, _ := protocol.ClusterOf(m.subject)
	err := protocol.ReadBatch(m.data, maxLive, func(cluster string, data []byte) bool {
		msg, err := o.verify.Batched(cluster, m.subject, m.data, m.header, data, signers)
		subject := protocol.SubjectFor(cluster, msg)
		if err == nil && (msg.To != 0 || subject == "") {
			err = fmt.Errorf("%s message to %d in a batch", msg.Type, msg.To)
		}
		if err != nil {
			o.metrics.live.WithLabelValues(protocol.KindBatch, invalid(err)).Inc()
			o.log.Debug("dropping an invalid message of a batch", "subject", m.subject, "cluster", cluster, "err", err)
			return true
		}
		rec.Via(cluster, conn)
		kind := subject[strings.LastIndexByte(subject, '.')+1:]
		if !slices.Contains(liveKinds, kind) && !slices.Contains(memberKinds, kind) {
			return true
		}
		if o.deferredFor(cluster) {
			o.flushWrites() // its history as written, for this message
		}
		o.observe(rec, liveMsg{subject: subject, at: m.at, entry: &msg})
		return true
	})
	o.flushWrites()
	if err != nil {
		o.metrics.live.WithLabelValues(protocol.KindBatch, "invalid").Inc()
		o.log.Debug("dropping an invalid batch", "subject", m.subject, "err", err)
	}
}

// beatMaxAge bounds how far a beat's time may be from the observer's
// clock, as the nodes' ELECTION_MAX_MESSAGE_AGE does by default.
const beatMaxAge = 2 * time.Second

// beat notes the beat of a member process of the deployment conn
// (protocol.md, "Beats"): with keys for conn, signed by the member it
// names; dated within beatMaxAge. While it beats, its leaderships of the
// deployment's elections are not silent (recorder.HeardBeat).
func (o *Observer) beat(rec *recorder.Recorder, conn string, m liveMsg) {
	b, err := protocol.ReadBeat(m.data)
	if err == nil {
		err = o.checkBeat(conn, m, b)
	}
	if err != nil {
		o.metrics.live.WithLabelValues(protocol.KindBeat, invalid(err)).Inc()
		o.log.Debug("dropping an invalid beat", "subject", m.subject, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(protocol.KindBeat, "ok").Inc()
	rec.HeardBeat(conn, b.From, m.at)
}

// checkBeat checks beat b, which arrived as m on conn's beat subject.
func (o *Observer) checkBeat(conn string, m liveMsg, b protocol.Beat) error {
	keys, err := o.keysOf(conn)
	if err != nil {
		return err
	}
	if keys != nil {
		signer, err := keys.Verify(m.subject, m.data, m.header)
		if err != nil {
			return err
		}
		if err := signing.CheckSigner(signer, b.From); err != nil {
			return err
		}
	}
	if age := m.at.Sub(b.Sent); age > beatMaxAge || age < -beatMaxAge {
		return fmt.Errorf("a beat %v old", age)
	}
	return nil
}

// checkRenewal checks that a byzantine leader's round carries the
// certificate of its own leadership in its term, valid under the
// cluster's keys: only then is it the leader's heartbeat. A certificate
// that held before is not checked again (verified).
func (o *Observer) checkRenewal(cluster string, msg protocol.Message) error {
	keys, err := o.keysOf(cluster)
	if err != nil {
		return err
	}
	if keys == nil {
		return fmt.Errorf("%w: cluster %s", protocol.ErrNeedKeys, cluster)
	}
	members, err := keys.MembersOf(msg.Cert.Version)
	if err != nil {
		return fmt.Errorf("%w: %w", protocol.ErrUncertified, err)
	}
	if err := o.verified[cluster].VerifyCertificateFor(members, *msg.Cert, cluster, msg.Term, msg.From); err != nil {
		return fmt.Errorf("%w: %w", protocol.ErrUncertified, err)
	}
	return nil
}

// evidence records the member that a bz_evidence message proves faulty.
func (o *Observer) evidence(cluster string, m liveMsg) {
	e, err := o.readEvidence(cluster, m)
	if err != nil {
		o.metrics.live.WithLabelValues(protocol.KindEvidence, invalid(err)).Inc()
		o.log.Debug("dropping invalid evidence", "subject", m.subject, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(protocol.KindEvidence, "ok").Inc()
	rec := history.Record{Kind: history.KindFaulty, Member: e.Member(), At: protocol.Timestamp{Time: m.at}, Evidence: &e}
	kept, err := o.apply(cluster, rec)
	if err != nil {
		o.log.Error("cannot record evidence", "cluster", cluster, "member", e.Member(), "err", err)
		return
	}
	if len(kept) > 0 {
		a, b := e.First.Statement, e.Second.Statement
		o.log.Warn("faulty member: it signed two contradicting statements", "cluster", cluster, "member", e.Member(),
			"kind", a.Kind, "term", a.Term, "first_leader", a.Leader, "second_leader", b.Leader, "order", a.Order)
	}
	o.changed(cluster, kept)
}

// readEvidence reads a bz_evidence message of cluster and checks it: sent
// and signed by a member, on its subject, well formed, and a proof that
// holds (certify.VerifyEvidence: two contradicting statements of this
// cluster, both signed with the key of the member they convict). A
// signature that fails, anywhere, is a *protocol.ValidationError with
// ReasonSignature; so is evidence of a cluster without keys, which
// cannot be checked.
func (o *Observer) readEvidence(cluster string, m liveMsg) (certify.Evidence, error) {
	keys, err := o.keysOf(cluster)
	if err != nil {
		return certify.Evidence{}, err
	}
	if keys == nil {
		return certify.Evidence{}, &protocol.ValidationError{Reason: protocol.ReasonSignature, Detail: "evidence cannot be checked without the members' keys (OBSERVER_KEYS_DIR)"}
	}
	msg, err := o.readMessage(cluster, m)
	if err != nil {
		return certify.Evidence{}, err
	}
	if err := protocol.CheckRoute(cluster, m.subject, msg); err != nil {
		return certify.Evidence{}, err
	}
	if err := validateWith(keys, msg); err != nil {
		return certify.Evidence{}, err
	}
	if msg.Type != protocol.TypeBzEvidence || msg.Evidence == nil {
		return certify.Evidence{}, fmt.Errorf("%s message on %s", msg.Type, m.subject)
	}
	e := *msg.Evidence
	if c := e.First.Statement.Cluster; c != cluster {
		return certify.Evidence{}, fmt.Errorf("evidence of cluster %q on %s", c, m.subject)
	}
	if err := certify.VerifyEvidence(keys.Members(), e); err != nil {
		return certify.Evidence{}, &protocol.ValidationError{Reason: protocol.ReasonSignature, Detail: err.Error()}
	}
	return e, nil
}

// write records recs of cluster, if any, and publishes what was kept.
func (o *Observer) write(cluster string, recs []history.Record) {
	if len(recs) == 0 {
		return
	}
	if o.deferring {
		if o.deferredFor(cluster) {
			o.flushWrites() // one batch per cluster in a flush
		}
		o.deferred = append(o.deferred, history.Batch{Cluster: cluster, Records: recs})
		if len(o.deferred) == history.MaxApplyAll {
			o.flushWrites()
		}
		return
	}
	kept, err := o.apply(cluster, recs...)
	if err != nil {
		o.log.Error("cannot record", "cluster", cluster, "err", err)
		return
	}
	o.changed(cluster, kept)
}

// deferredFor reports whether records of cluster wait in o.deferred.
func (o *Observer) deferredFor(cluster string) bool {
	return slices.ContainsFunc(o.deferred, func(b history.Batch) bool { return b.Cluster == cluster })
}

// flushWrites writes the records deferred while a batch of live messages
// was observed, each of a different cluster (batch flushes before a
// second message of a cluster is observed), with one sync for them all
// (history.Store.ApplyAll).
func (o *Observer) flushWrites() {
	batches := o.deferred
	o.deferred = nil
	if len(batches) > 0 {
		o.writeAll(batches)
	}
}

// writeAll writes batches, each of a different cluster, with one sync
// (history.Store.ApplyAll), counts what the caps dropped for them (as
// apply does) and tells of each change. It returns the records each
// kept, or nil, the failure logged for each cluster, if nothing was
// written.
func (o *Observer) writeAll(batches []history.Batch) [][]history.Record {
	before := make([]cappedCounts, len(batches))
	for i, b := range batches {
		before[i] = o.capped(b.Cluster)
	}
	kept, err := o.store.ApplyAll(batches)
	if err != nil {
		for _, b := range batches {
			o.log.Error("cannot record", "cluster", b.Cluster, "err", err)
		}
		return nil
	}
	for i, b := range batches {
		o.countDropped(b.Cluster, before[i], kept[i])
		o.changed(b.Cluster, kept[i])
	}
	return kept
}

// answered records a leader's answer to the observer's query.
func (o *Observer) answered(rec *recorder.Recorder, m liveMsg) {
	cluster := m.subject[strings.LastIndexByte(m.subject, '.')+1:]
	a, err := o.readAnnouncement(cluster, m.data, m.header)
	if err != nil {
		o.metrics.live.WithLabelValues(protocol.KindQuery, invalid(err)).Inc()
		o.log.Debug("dropping invalid answer", "cluster", cluster, "err", err)
		return
	}
	o.metrics.live.WithLabelValues(protocol.KindQuery, "ok").Inc()
	recs := rec.Answered(cluster, a, o.now())
	if recs == nil {
		return // the stream delivered it, or a newer one, meanwhile
	}
	kept, err := o.recordAnnouncement(cluster, a, recs)
	if err != nil {
		o.log.Error("cannot record the leader's answer", "cluster", cluster, "term", a.Term, "err", err)
		return
	}
	o.changed(cluster, kept)
}

// checkSilence ends every current leadership whose leader has not been
// heard from for a failure-detection window while the observer listened.
// The writes, one per cluster, go MaxApplyAll at a time with one sync
// (history.Store.ApplyAll).
func (o *Observer) checkSilence(rec *recorder.Recorder, now time.Time) {
	writes := rec.Silence(now, o.listening())
	for len(writes) > 0 {
		n := min(len(writes), history.MaxApplyAll)
		batches := make([]history.Batch, n)
		for i, w := range writes[:n] {
			batches[i] = history.Batch{Cluster: w.Cluster, Records: w.Records}
		}
		writes = writes[n:]
		for i, recs := range o.writeAll(batches) {
			for _, r := range recs {
				o.log.Info("leader silent", "cluster", batches[i].Cluster, "term", r.Term, "reason", r.Reason, "ended_at", r.At.Time)
			}
		}
	}
}

// changed updates the metrics, the live page and the event streams after
// kept was recorded.
func (o *Observer) changed(cluster string, kept []history.Record) {
	if len(kept) == 0 {
		return
	}
	var events []streamEvent
	var flaps []flap
	o.store.Read(cluster, func(c *history.Cluster) {
		o.metrics.recorded(cluster, kept, c)
		events = streamEvents(cluster, kept, c)
		flaps = flapsOf(kept, c)
	})
	for _, r := range kept {
		if r.Kind == history.KindSplit {
			o.log.Warn("split brain", "cluster", cluster, "reason", r.Reason, "leaders", r.Leaders)
		}
	}
	for _, f := range flaps {
		o.log.Info("leader change reversed within a second (flap)", "cluster", cluster, "term", f.short.Term, "leader", f.short.Leader,
			"lasted", f.back.StartedAt.Sub(f.short.StartedAt), "back", f.back.Leader, "back_term", f.back.Term)
	}
	for _, e := range events {
		o.metrics.events.WithLabelValues(e.name).Inc()
	}
	o.feed.publish(events...)
	o.hub.notify(cluster)
}

// flap is a leadership that became a flap, and the one that reversed it.
type flap struct {
	short, back history.Leadership
}

// flapsOf returns the flaps that kept, just written to the history c,
// made.
func flapsOf(kept []history.Record, c *history.Cluster) []flap {
	var out []flap
	for _, r := range kept {
		if r.Kind != history.KindLeader {
			continue
		}
		i, ok := c.Index(r.Term)
		if !ok {
			continue
		}
		for _, j := range c.NewFlaps(i) {
			out = append(out, flap{short: c.Leaderships[j], back: c.Leaderships[j+1]})
		}
	}
	return out
}
