package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

// stopGrace is how long a node may take to exit after SIGTERM before it is
// killed; the contract promises 2 s.
const stopGrace = 5 * time.Second

// environment is what every measurement shares: the NATS server, the
// benchmark's own connection to it and an HTTP client for the nodes.
type environment struct {
	cfg     config
	out     io.Writer
	ns      *server.Server
	natsURL string
	nc      *nats.Conn
	http    *http.Client
}

func newEnvironment(cfg config, out io.Writer) (*environment, error) {
	ns, err := localcluster.StartNATS("127.0.0.1", -1)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("bench"))
	if err != nil {
		localcluster.StopNATS(ns)
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	return &environment{cfg: cfg, out: out, ns: ns, natsURL: ns.ClientURL(), nc: nc, http: localcluster.NewHTTPClient()}, nil
}

func (e *environment) close() {
	e.nc.Close()
	localcluster.StopNATS(e.ns)
}

// result holds the measurements of one algorithm.
type result struct {
	algorithm protocol.Algorithm
	coldStart time.Duration
	crash     []time.Duration // SIGKILL of the leader until the survivors agree
	rejoin    []time.Duration // restart of the killed node until all agree on it
	handoff   []time.Duration // SIGTERM to the leader until the survivors agree
	termExit  []time.Duration // SIGTERM to the leader until its process exited
	badExits  int             // SIGTERM that did not end in exit status 0

	crashMsgs   []int
	crashElects []int // elections started by the survivors per crash failover
	rejoinMsgs  []int
	handoffMsgs []int

	steadyRan         bool
	steadyElections   int
	steadyChanges     int // leader changes counted by the nodes
	steadyAnnounced   int // announcements on the leader subject
	steadyMessages    int
	termRegressions   int
	electionsObserved bool // the nodes expose election_elections_started_total
}

// wire counts what is published on one cluster's subjects.
type wire struct {
	mu            sync.Mutex
	messages      int // node-to-node messages other than heartbeats
	announcements int
	lastTerm      uint64
	regressions   int // announcements whose term did not exceed the last one
	lastActive    time.Time
}

// handle runs on the NATS connection's delivery goroutine.
func (w *wire) handle(m *nats.Msg) {
	parts := strings.SplitN(m.Subject, ".", 4)
	if len(parts) < 3 || parts[2] == protocol.KindQuery {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if parts[2] == protocol.KindLeader {
		w.announcements++
		w.lastActive = now
		if a, err := protocol.DecodeAnnouncement(m.Data); err == nil {
			if a.Term <= w.lastTerm {
				w.regressions++
			}
			w.lastTerm = max(w.lastTerm, a.Term)
		}
		return
	}
	if msg, err := protocol.Decode(m.Data); err == nil && protocol.Steady(msg) {
		return
	}
	w.messages++
	w.lastActive = now
}

func (w *wire) counts() (messages, announcements int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.messages, w.announcements
}

func (w *wire) lastActivity() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastActive
}

func (w *wire) termRegressions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.regressions
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago.
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}

// measure runs every measurement for one algorithm on a fresh cluster. On
// error the result holds what was measured so far.
func (e *environment) measure(ctx context.Context, algorithm protocol.Algorithm) (*result, error) {
	res := &result{algorithm: algorithm}
	cluster := "bench-" + string(algorithm)
	w := &wire{}
	// Every subject of the cluster but the query subject: a subscriber
	// there that never answers would make every query wait its time-out.
	subjects := append(protocol.BroadcastSubjects(cluster), protocol.LeaderSubject(cluster), protocol.Root+"."+cluster+"."+protocol.KindNode+".*")
	for _, subject := range subjects {
		sub, err := e.nc.Subscribe(subject, w.handle)
		if err != nil {
			return res, err
		}
		defer sub.Unsubscribe()
	}
	if err := e.nc.Flush(); err != nil {
		return res, err
	}
	defer func() { res.termRegressions = w.termRegressions() }()

	addrs, err := freeAddrs(e.cfg.nodes)
	if err != nil {
		return res, err
	}
	ids := make([]uint64, e.cfg.nodes)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	nodes, err := localcluster.NewNodes(localcluster.Spec{
		Binary:    e.cfg.binary,
		NATSURL:   e.natsURL,
		Cluster:   cluster,
		Algorithm: string(algorithm),
		IDs:       ids,
		HTTPAddrs: addrs,
		LogDir:    e.cfg.logDir + "/" + string(algorithm),
	})
	if err != nil {
		return res, err
	}
	defer localcluster.StopAll(nodes, stopGrace)
	top, survivors := nodes[len(nodes)-1], nodes[:len(nodes)-1]
	next := survivors[len(survivors)-1]

	// Cold start.
	start := time.Now()
	for _, n := range nodes {
		if err := n.Start(); err != nil {
			return res, err
		}
	}
	at, err := e.waitAgreed(ctx, nodes, top.ID)
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	res.coldStart = at.Sub(start)
	fmt.Fprintf(e.out, "  cold start: %s\n", ms(res.coldStart))
	if err := e.waitQuiet(ctx, w); err != nil {
		return res, err
	}

	// leave takes the leader down with sig, measures until the survivors
	// agree, then brings it back and measures until all agree on it again.
	leave := func(sig syscall.Signal) (took, exit time.Duration, msgs, elections int, err error) {
		msgs0, _ := w.counts()
		elections0, _ := e.sumMetric(ctx, survivors, "election_elections_started_total")
		t0 := time.Now()
		if err := top.Signal(sig); err != nil {
			return 0, 0, 0, 0, err
		}
		at, err := e.waitAgreed(ctx, survivors, next.ID)
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("after %s of leader %d: %w", sig, top.ID, err)
		}
		exitErr := top.Wait()
		if sig == syscall.SIGTERM && exitErr != nil {
			res.badExits++
			fmt.Fprintf(e.out, "  node %d after SIGTERM: %v\n", top.ID, exitErr)
		}
		exit = top.ExitedAt().Sub(t0)
		if err := e.waitQuiet(ctx, w); err != nil {
			return 0, 0, 0, 0, err
		}
		msgs1, _ := w.counts()
		elections1, found := e.sumMetric(ctx, survivors, "election_elections_started_total")
		res.electionsObserved = found
		return at.Sub(t0), exit, msgs1 - msgs0, int(elections1 - elections0), nil
	}
	rejoin := func() error {
		msgs0, _ := w.counts()
		t0 := time.Now()
		if err := top.Start(); err != nil {
			return err
		}
		at, err := e.waitAgreed(ctx, nodes, top.ID)
		if err != nil {
			return fmt.Errorf("after restart of node %d: %w", top.ID, err)
		}
		res.rejoin = append(res.rejoin, at.Sub(t0))
		if err := e.waitQuiet(ctx, w); err != nil {
			return err
		}
		msgs1, _ := w.counts()
		res.rejoinMsgs = append(res.rejoinMsgs, msgs1-msgs0)
		return nil
	}

	for round := range e.cfg.rounds {
		took, _, msgs, elections, err := leave(syscall.SIGKILL)
		if err != nil {
			return res, fmt.Errorf("crash round %d: %w", round+1, err)
		}
		res.crash = append(res.crash, took)
		res.crashMsgs = append(res.crashMsgs, msgs)
		res.crashElects = append(res.crashElects, elections)
		if err := rejoin(); err != nil {
			return res, fmt.Errorf("crash round %d: %w", round+1, err)
		}
	}
	fmt.Fprintf(e.out, "  crash failover: %d rounds, p50 %s\n", len(res.crash), ms(quantile(res.crash, 0.5)))

	for round := range e.cfg.rounds {
		took, exit, msgs, _, err := leave(syscall.SIGTERM)
		if err != nil {
			return res, fmt.Errorf("handoff round %d: %w", round+1, err)
		}
		res.handoff = append(res.handoff, took)
		res.termExit = append(res.termExit, exit)
		res.handoffMsgs = append(res.handoffMsgs, msgs)
		if err := rejoin(); err != nil {
			return res, fmt.Errorf("handoff round %d: %w", round+1, err)
		}
	}
	fmt.Fprintf(e.out, "  SIGTERM handoff: %d rounds, p50 %s\n", len(res.handoff), ms(quantile(res.handoff, 0.5)))

	if e.cfg.steady > 0 {
		if err := e.steadyState(ctx, res, w, nodes, top.ID); err != nil {
			return res, fmt.Errorf("steady state: %w", err)
		}
	}

	results := localcluster.StopAll(nodes, stopGrace)
	for _, r := range results {
		if r.Killed || r.Err != nil {
			return res, fmt.Errorf("node %d did not stop cleanly: killed=%t, %v", r.Node.ID, r.Killed, r.Err)
		}
	}
	return res, nil
}

// steadyState keeps the converged cluster running for the steady duration
// while burners keep every core busy, and counts what changed.
func (e *environment) steadyState(ctx context.Context, res *result, w *wire, nodes []*localcluster.Node, leader uint64) error {
	if err := e.waitQuiet(ctx, w); err != nil {
		return err
	}
	elections0, _ := e.sumMetric(ctx, nodes, "election_elections_started_total")
	changes0, _ := e.sumMetric(ctx, nodes, "election_leader_changes_total")
	msgs0, ann0 := w.counts()

	bs, err := startBurners(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "  steady state: %s with %d CPU burners\n", e.cfg.steady, len(bs))
	timer := time.NewTimer(e.cfg.steady)
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	timer.Stop()
	bs.stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	elections1, found := e.sumMetric(ctx, nodes, "election_elections_started_total")
	changes1, _ := e.sumMetric(ctx, nodes, "election_leader_changes_total")
	msgs1, ann1 := w.counts()
	res.steadyRan = true
	res.electionsObserved = res.electionsObserved || found
	res.steadyElections = int(elections1 - elections0)
	res.steadyChanges = int(changes1 - changes0)
	res.steadyAnnounced = ann1 - ann0
	res.steadyMessages = msgs1 - msgs0
	_, err = e.waitAgreed(ctx, nodes, leader)
	return err
}

// waitAgreed polls /status of the live nodes until every one names want as
// its leader, and returns when that was seen.
func (e *environment) waitAgreed(ctx context.Context, live []*localcluster.Node, want uint64) (time.Time, error) {
	deadline := time.Now().Add(e.cfg.timeout)
	ticker := time.NewTicker(e.cfg.poll)
	defer ticker.Stop()
	for {
		ok, err := e.agreed(ctx, live, want)
		if err != nil {
			return time.Time{}, err
		}
		if ok {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no agreement on leader %d within %s: %s", want, e.cfg.timeout, e.describe(ctx, live))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-ticker.C:
		}
	}
}

// agreed asks the nodes in turn and stops at the first that disagrees.
func (e *environment) agreed(ctx context.Context, live []*localcluster.Node, want uint64) (bool, error) {
	for _, n := range live {
		if !n.Running() {
			return false, fmt.Errorf("node %d exited: %v; see %s", n.ID, n.ExitErr(), n.LogPath)
		}
		s, err := localcluster.FetchStatus(ctx, e.http, n.HTTPAddr)
		if err != nil || s.Leader == nil || *s.Leader != want {
			return false, nil
		}
	}
	return true, nil
}

// describe renders what each node reports, for error messages.
func (e *environment) describe(ctx context.Context, live []*localcluster.Node) string {
	var b strings.Builder
	for i, n := range live {
		if i > 0 {
			b.WriteString(", ")
		}
		s, err := localcluster.FetchStatus(ctx, e.http, n.HTTPAddr)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "node %d: %v", n.ID, err)
		case s.Leader == nil:
			fmt.Fprintf(&b, "node %d: leader null (%s, term %d)", n.ID, s.State, s.Term)
		default:
			fmt.Fprintf(&b, "node %d: leader %d (%s, term %d)", n.ID, *s.Leader, s.State, s.Term)
		}
	}
	return b.String()
}

// waitQuiet waits until no election message or announcement has been seen
// for the quiet period, so that an election's trailing messages are counted
// with it and not with the next one.
func (e *environment) waitQuiet(ctx context.Context, w *wire) error {
	deadline := time.Now().Add(e.cfg.timeout)
	for {
		idle := time.Since(w.lastActivity())
		if idle >= e.cfg.quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("election messages still flowing after %s", e.cfg.timeout)
		}
		timer := time.NewTimer(e.cfg.quiet - idle)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// sumMetric adds the metric over the nodes' /metrics; found tells whether
// any node exposes it. Unreachable nodes count as zero.
func (e *environment) sumMetric(ctx context.Context, nodes []*localcluster.Node, name string) (sum float64, found bool) {
	for _, n := range nodes {
		m, err := localcluster.FetchMetrics(ctx, e.http, n.HTTPAddr)
		if err != nil {
			continue
		}
		for series := range m {
			if series == name || strings.HasPrefix(series, name+"{") {
				found = true
				break
			}
		}
		sum += m.Sum(name)
	}
	return sum, found
}
