// Command node is one member of an election cluster: it runs Bully, the
// Chang–Roberts ring or Paxos with leases over NATS, announces each leadership it wins on
// election.<cluster>.leader, and serves /healthz, /status and /metrics.
//
// It is configured only by environment variables (see Config). A missing or
// invalid variable makes it exit with status 2 and one line on stderr that
// names the variable. SIGTERM or SIGINT makes it resign, hand over if it
// leads, and exit with status 0 within 2 s. Any other failure exits with
// status 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/node/natsnode"
	"github.com/baton-election/baton/pkg/protocol"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitConfig = 2
)

// httpShutdownTimeout bounds the HTTP server's shutdown, after the node's.
const httpShutdownTimeout = 300 * time.Millisecond

// maxProcs is the node's GOMAXPROCS unless the environment sets one: a
// node's work is a few messages at a time, and with one P the runtime does
// not wake and spin a second thread for each of them (about a quarter less
// CPU at idle, measured with 5 nodes).
const maxProcs = 1

func main() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(maxProcs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, environment(os.Environ()), os.Stderr)
	stop()
	os.Exit(code)
}

// environment turns KEY=value pairs into a map.
func environment(pairs []string) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// run is the whole service: it returns the exit status once ctx ends or
// the node fails. Logs, and the line about an invalid configuration, go to
// stderr.
func run(ctx context.Context, environ map[string]string, stderr io.Writer) int {
	cfg, err := loadConfig(environ)
	if err != nil {
		fmt.Fprintf(stderr, "node: invalid configuration: %v\n", err)
		return exitConfig
	}
	log := cfg.newLogger(stderr).With("node", cfg.ID, "cluster", cfg.Cluster)
	switch {
	case cfg.signer == nil:
		log.Warn("no member keys (ELECTION_KEY_FILE, ELECTION_KEYS_FILE): messages are not signed, and any NATS client can speak for any member")
	case cfg.CredsFile != "" && !cfg.withCredential():
		log.Warn("member credential set, but the node connects to NATS with NATS_USER, NATS_TOKEN or NATS_CREDS, not with its credential: connection events, which must carry the member's key, are ignored, and departures are seen by resignations and silences")
	case !cfg.asNkeyUser():
		log.Warn("member keys set, but the node connects to NATS with NATS_USER, NATS_TOKEN or NATS_CREDS, not as its nkey user: connection events, which must carry the member's key, are ignored, and failures are detected by heartbeats")
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		log.Error("listen", "addr", cfg.HTTPAddr, "err", err)
		return exitFailed
	}
	// HTTP answers from the start: while the first connection to NATS is
	// being made, /status with no leader and the rest 503; the node's
	// endpoints after.
	handler := &lateHandler{clusters: cfg.clusters, waiting: protocol.Status{
		ID: cfg.ID, Algorithm: protocol.Algorithm(cfg.Algorithm), State: "follower",
	}}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopHTTP := func() {
		shutdown, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			srv.Close()
		}
	}
	log.Info("serving HTTP", "addr", ln.Addr().String(), "algorithm", cfg.Algorithm, "timing", fmt.Sprintf("%+v", cfg.timing),
		"elections", len(cfg.clusters), "rank", cfg.Rank)

	keyOpts := cfg.keyOptions()
	nc, withKey, err := natsconn.Dial(ctx, strings.Join(cfg.urls, ","), cfg.natsOptions(log), keyOpts, log)
	if err != nil {
		// Stopped by a signal before NATS answered: nothing to hand over.
		stopHTTP()
		log.Info("stopped before connecting to NATS", "status", exitOK)
		return exitOK
	}
	cfg.nkeyRefused = keyOpts != nil && !withKey
	var (
		runner  interface{ Run(context.Context) error }
		serving http.Handler
	)
	if cfg.several() {
		runner, serving, err = cfg.newGroup(nc, log)
	} else {
		runner, serving, err = cfg.newNode(nc, cfg.Cluster, log)
	}
	if err != nil {
		stopHTTP()
		nc.Close()
		log.Error("node", "err", err)
		return exitFailed
	}
	handler.set(serving)

	runCtx, stopNode := context.WithCancel(ctx)
	defer stopNode()
	runErr := make(chan error, 1)
	go func() { runErr <- runner.Run(runCtx) }()
	code := exitOK
	select {
	case err = <-runErr:
	case err = <-served:
		// The HTTP server failed: leave the cluster as on SIGTERM.
		log.Error("HTTP server", "err", err)
		code = exitFailed
		stopNode()
		err = <-runErr
	}
	if err != nil {
		log.Error("node stopped", "err", err)
		code = exitFailed
	}
	stopHTTP()
	log.Info("stopped", "status", code)
	return code
}

// newNode is the node of one election, on its own connection nc, and its
// HTTP endpoints.
func (c *Config) newNode(nc *nats.Conn, cluster string, log *slog.Logger) (*node.Node, http.Handler, error) {
	ncfg, err := c.nodeConfig(cluster, log)
	if err != nil {
		return nil, nil, err
	}
	n, err := natsnode.New(nc, ncfg)
	if err != nil {
		return nil, nil, err
	}
	n.Registry().MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h := n.Handler()
	return n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := r.URL.Query().Get("cluster"); r.URL.Path == "/status" && c != "" && c != cluster {
			http.Error(w, fmt.Sprintf("not in election %q", c), http.StatusNotFound)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/elections" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode([]protocol.Status{n.Status()})
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// stateJournal is the file, in ELECTION_DATA, where a node in several
// elections appends their states (node.GroupConfig.StateJournal); a
// cluster name has no dot, so no election's directory takes its name.
const stateJournal = "state.journal"

// newGroup is the group of the node's elections over nc, and its HTTP
// endpoints.
func (c *Config) newGroup(nc *nats.Conn, log *slog.Logger) (*natsnode.Group, http.Handler, error) {
	g, err := natsnode.NewGroup(nc, natsnode.GroupConfig{
		Node: node.GroupConfig{ID: c.ID, Logger: log, Beat: c.beat(), StateJournal: filepath.Join(c.DataDir, stateJournal)},
		Conn: c.Cluster, ConnectionEvents: c.ConnectionEvents, Probe: c.probe,
		Signer: c.signer, Keys: c.keys, Batch: c.batch(),
		BeatTimeout: max(time.Duration(c.timing.LeaderTimeoutTicks)*c.Tick, beatTimeoutBeats*c.beat()),
	})
	if err != nil {
		return nil, nil, err
	}
	for _, cluster := range c.clusters {
		ncfg, err := c.nodeConfig(cluster, log.With("election", cluster))
		if err != nil {
			return nil, nil, err
		}
		if _, err := g.Add(ncfg); err != nil {
			return nil, nil, fmt.Errorf("election %s: %w", cluster, err)
		}
	}
	g.Registry().MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return g, g.Handler(), nil
}

// beat is how often the process of several elections beats: each
// heartbeat interval.
func (c *Config) beat() time.Duration { return time.Duration(c.timing.HeartbeatTicks) * c.Tick }

// beatTimeoutBeats is how many beat intervals, at least, a member may be
// silent before each election is told that it is down: a false alarm
// fails over every election it leads, so the beats wait longer than one
// election's leader time-out.
const beatTimeoutBeats = 5

// batch is the group's batch window: off (negative) for 0.
func (c *Config) batch() time.Duration {
	if c.BatchWindow == 0 {
		return -1
	}
	return c.BatchWindow
}

// nodeConfig is the configuration of the node's election of cluster.
func (c *Config) nodeConfig(cluster string, log *slog.Logger) (natsnode.Config, error) {
	keys, err := c.keysOf(cluster)
	if err != nil {
		return natsnode.Config{}, fmt.Errorf("ELECTION_KEYS_FILE: %w", err)
	}
	rank, err := election.ParseRank(c.Rank, cluster)
	if err != nil {
		return natsnode.Config{}, fmt.Errorf("ELECTION_RANK: %w", err)
	}
	return natsnode.Config{
		Node: node.Config{
			Cluster:   cluster,
			Algorithm: protocol.Algorithm(c.Algorithm),
			Election: election.Config{ID: c.ID, Members: c.members, Timing: c.timing, Dynamic: c.dynamic(), Voters: c.voters,
				KeepLeader: c.KeepLeader, Rank: rank},
			DataDir: c.dataDir(cluster),
			Tick:    c.Tick,
			Logger:  log,
		},
		Signer:           c.signer,
		Keys:             keys,
		MemberSet:        c.memberSet,
		MaxMessageAge:    c.MaxMessageAge,
		ConnectionEvents: c.ConnectionEvents,
		Probe:            c.probe,
	}, nil
}

// lateHandler serves the node's handler once it is set. Before, while
// the first connection to NATS is being made, GET /status answers the
// contract's object with no leader (a node that knows none; with
// ?cluster=, of that election, 404 if the node is not in it) and every
// other path 503, /healthz included.
type lateHandler struct {
	h        atomic.Pointer[http.Handler]
	waiting  protocol.Status
	clusters []string
}

func (l *lateHandler) set(h http.Handler) { l.h.Store(&h) }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/status" {
		st := l.waiting
		st.Cluster = l.clusters[0]
		if c := r.URL.Query().Get("cluster"); c != "" {
			if !slices.Contains(l.clusters, c) {
				http.Error(w, fmt.Sprintf("not in election %q", c), http.StatusNotFound)
				return
			}
			st.Cluster = c
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
		return
	}
	http.Error(w, "waiting for NATS", http.StatusServiceUnavailable)
}
