// Command fleet is an example application: a service of identical
// replicas, each of which embeds a candidate of one election (pkg/node)
// and works only while it leads. Nothing in a replica's configuration is
// its own: its member ID comes from NODE_ID if set, else from its member
// credential if it has one, else from its hostname (a hash,
// IDFromHostname, or with NODE_ID_FROM=ordinal a StatefulSet's ordinal,
// IDFromOrdinal), so a Compose service scaled with --scale or a Kubernetes
// Deployment runs it as it is. The replicas elect with dynamic
// membership (Bully by default, or the ring): a replica that starts joins,
// one that stops, dies or hangs leaves, and the highest ID present leads
// (with ELECTION_KEEP_LEADER=true the leader stays until it leaves).
//
// While it leads, a replica does one unit of "work" every
// FLEET_WORK_INTERVAL: it logs it and counts it (GET /work, and
// fleet_work_done_total on /metrics). GET /status, /healthz and /metrics
// are the node's own.
//
// Configuration is by environment (Config). A missing or invalid variable
// makes it exit with status 2 and one line on stderr that names the
// variable. SIGTERM or SIGINT ends the work, hands leadership over and
// exits with status 0 within 2 s. Any other failure exits with status 1.
// docs/fleet.md tells how to run it.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/membercreds"
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

// httpShutdownTimeout bounds the HTTP server's shutdown, after the node's
// (node.DefaultShutdownTimeout): both fit in the 2 s a replica has to
// leave.
const httpShutdownTimeout = 300 * time.Millisecond

// The first connection to NATS is tried again and again, every
// firstRetry at first, backing off to maxRetry.
const (
	firstRetry = 250 * time.Millisecond
	maxRetry   = 2 * time.Second
)

func main() {
	// A replica's work is a few messages at a time: one P is enough, and
	// spares a shared host's CPU (as the node service does).
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, environment(os.Environ()), os.Hostname, os.Stderr)
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

// run is the whole replica: it returns the exit status once ctx ends or
// the node fails.
func run(ctx context.Context, environ map[string]string, hostname func() (string, error), stderr io.Writer) int {
	cfg, err := loadConfig(environ, hostname)
	if err != nil {
		fmt.Fprintf(stderr, "fleet: invalid configuration: %v\n", err)
		return exitConfig
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.level})).
		With("member", cfg.id, "cluster", cfg.Cluster)
	log.Info("starting", "id_from", cfg.idSource, "algorithm", cfg.Algorithm, "keep_leader", cfg.KeepLeader, "data", cfg.DataDir)
	if cfg.signer == nil {
		log.Warn("no member credential (ELECTION_CREDS_FILE, ELECTION_AUTHORITY): messages are not signed, and any NATS client allowed to publish on the cluster's subjects can speak for any member")
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		log.Error("listen", "addr", cfg.HTTPAddr, "err", err)
		return exitFailed
	}
	// HTTP answers from the start, 503 until the node is there.
	var routes atomic.Pointer[http.Handler]
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := routes.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "waiting for NATS", http.StatusServiceUnavailable)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopHTTP := func() {
		shutdown, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			srv.Close()
		}
	}
	log.Info("serving HTTP", "addr", ln.Addr().String())

	nc, err := connect(ctx, &cfg, log)
	if err != nil {
		// Stopped before NATS answered: nothing to hand over.
		stopHTTP()
		log.Info("stopped before connecting to NATS", "status", exitOK)
		return exitOK
	}
	w := newWorker(cfg, log)
	n, err := natsnode.New(nc, natsnode.Config{
		Node: node.Config{
			Cluster:   cfg.Cluster,
			Algorithm: protocol.Algorithm(cfg.Algorithm),
			Election: election.Config{
				ID: cfg.id,
				// With dynamic membership a member starts knowing itself
				// alone, and counts the others as it hears them.
				Members:    []uint64{cfg.id},
				Dynamic:    true,
				KeepLeader: cfg.KeepLeader,
				Timing:     election.DefaultTiming(1),
			},
			DataDir:   cfg.DataDir,
			Logger:    log,
			Callbacks: w.callbacks(),
		},
		Signer:           cfg.signer,
		Keys:             cfg.keys,
		ConnectionEvents: node.ConnectionEventsAuto,
		Probe:            cfg.probe,
	})
	if err != nil {
		stopHTTP()
		nc.Close()
		log.Error("node", "err", err)
		return exitFailed
	}
	w.status = n.Status
	if err := w.register(n.Registry()); err != nil {
		stopHTTP()
		nc.Close()
		log.Error("metrics", "err", err)
		return exitFailed
	}
	if err := w.watchCollisions(nc, cfg.Cluster); err != nil {
		stopHTTP()
		nc.Close()
		log.Error("subscribe", "err", err)
		return exitFailed
	}
	mux := http.NewServeMux()
	mux.Handle("GET /work", w)
	mux.Handle("/", n.Handler())
	var h http.Handler = mux
	routes.Store(&h)

	runCtx, stopNode := context.WithCancel(ctx)
	defer stopNode()
	ran := make(chan error, 1)
	go func() { ran <- n.Run(runCtx) }()
	code := exitOK
	select {
	case err = <-ran:
	case err = <-served:
		log.Error("HTTP server", "err", err)
		code = exitFailed
		stopNode() // leave the cluster as on SIGTERM
		err = <-ran
	}
	if err != nil {
		log.Error("node stopped", "err", err)
		code = exitFailed
	}
	stopHTTP()
	log.Info("stopped", "status", code, "work_done", w.done.Load())
	return code
}

// connect makes the first connection to NATS, trying again until it
// connects or ctx ends. Each failed attempt is logged, at warn level when
// its reason differs from the one before.
func connect(ctx context.Context, cfg *Config, log *slog.Logger) (*nats.Conn, error) {
	opts := append([]nats.Option{
		// The connection events of the NATS server name the member by
		// it: the others learn at once that a replica's connection
		// closed.
		nats.Name(protocol.ConnectionName(cfg.Cluster, cfg.id)),
		nats.NoEcho(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// A connection that died without a word is found out after two
		// unanswered pings, in 2-3 s, and replaced.
		nats.PingInterval(time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DrainTimeout(time.Second),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: the replica closed it
				log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS error", "err", err) }),
	}, cfg.authOptions()...)
	servers := strings.Join(cfg.urls, ",")
	wait := firstRetry
	last := ""
	for {
		nc, err := nats.Connect(servers, opts...)
		if err == nil {
			log.Info("NATS connected", "url", nc.ConnectedUrlRedacted())
			return nc, nil
		}
		level := slog.LevelWarn
		if err.Error() == last {
			level = slog.LevelDebug
		}
		last = err.Error()
		log.Log(ctx, level, "NATS connection attempt failed", "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetry)
	}
}

// authOptions authenticate to NATS: NATS_CREDS, or NATS_USER and
// NATS_PASSWORD, or else the member credential, if any: the one of
// ELECTION_CREDS_FILE or the one the replica issued itself
// (FLEET_ISSUER_SEED_FILE).
func (c *Config) authOptions() []nats.Option {
	switch {
	case c.NATSCreds != "":
		return []nats.Option{nats.UserCredentials(c.NATSCreds)}
	case c.NATSUser != "":
		return []nats.Option{nats.UserInfo(c.NATSUser, c.NATSPassword)}
	case c.signer != nil && c.signer.Credential() != "":
		// A NATS server that trusts the authority checks the credential
		// and confines the member to its cluster's subjects
		// (internal/natsauth); its connection events then name the
		// member, so that the others learn at once that it left.
		return membercreds.NATSOptions(c.signer.Credential(), c.signer.KeyPair())
	}
	return nil
}

// probe opens a connection named name to NATS and closes it: the node
// checks with it that the server delivers connection events.
func (c *Config) probe(ctx context.Context, name string) error {
	return natsconn.Probe(ctx, strings.Join(c.urls, ","), name, c.authOptions())
}
