package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/cmd/internal/freeport"
	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/cmd/internal/procstat"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// stopGrace is how long a node may take to exit after SIGTERM before it is
// killed; the contract promises 2 s.
const stopGrace = 5 * time.Second

// environment is what every measurement shares: the NATS server, the
// benchmark's own connection to it, an HTTP client for the nodes and the
// observer.
type environment struct {
	cfg       config
	raftLoads []raftLoad // hashicorp/raft under each load of the steady state
	out       io.Writer
	ns        *server.Server
	natsURL   string
	nc        *nats.Conn
	http      *http.Client
	// observers are the observers by whether they hold member keys: one
	// with keys drops what no member key signed, so the clusters without
	// keys have one of their own.
	observers map[bool]*observerProc
	// keyDirs holds the key directory of each cluster whose algorithm
	// needs member keys (byzantine), made before the server starts so
	// that it knows their users.
	keyDirs map[string]string
}

// clusterName is the name of the cluster of algorithm at size; steady
// for the steady-state run.
func clusterName(algorithm protocol.Algorithm, size int, steady bool) string {
	if steady {
		return fmt.Sprintf("bench-steady-%s-%d", algorithm, size)
	}
	return fmt.Sprintf("bench-%s-%d", algorithm, size)
}

// memberKeys makes the member keys of every cluster the run will start
// whose algorithm needs them, under dir.
func memberKeys(cfg config, dir string) (map[string]string, map[string]*signing.MemberKeys, error) {
	dirs, members := map[string]string{}, map[string]*signing.MemberKeys{}
	for _, a := range cfg.algorithms {
		if !a.NeedsKeys() {
			continue
		}
		smallest := cfg.plan[a][0]
		names := map[string]int{clusterName(a, smallest, true): smallest}
		for _, size := range cfg.plan[a] {
			names[clusterName(a, size, false)] = size
		}
		for name, size := range names {
			ids := make([]uint64, size)
			for i := range ids {
				ids[i] = uint64(i + 1)
			}
			keyDir := filepath.Join(dir, name)
			keys, err := localcluster.MakeMemberKeys(keyDir, name, a, ids)
			if err != nil {
				return nil, nil, err
			}
			dirs[name], members[name] = keyDir, keys
		}
	}
	return dirs, members, nil
}

// newNodes makes the nodes of spec, connecting with their member keys
// where the cluster has them, else as the node user.
func (e *environment) newNodes(spec localcluster.Spec) ([]*localcluster.Node, error) {
	keyDir, keyed := e.keyDirs[spec.Cluster]
	spec.Env = localcluster.NodeEnv()
	if keyed {
		spec.Env = nil
	}
	nodes, err := localcluster.NewNodes(spec)
	if err != nil || !keyed {
		return nodes, err
	}
	for _, n := range nodes {
		for _, kv := range localcluster.MemberEnv(keyDir, n.ID) {
			n.Setenv(kv)
		}
	}
	return nodes, nil
}

func newEnvironment(ctx context.Context, cfg config, out io.Writer) (*environment, error) {
	store, err := os.MkdirTemp("", "baton-bench-nats-")
	if err != nil {
		return nil, err
	}
	keyDirs, members, err := memberKeys(cfg, filepath.Join(cfg.logDir, "keys"))
	if err != nil {
		return nil, err
	}
	// Configured as a deployment: the nodes receive connection events.
	ns, err := natsconf.StartLocal(store, "127.0.0.1", -1, store, members)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("bench"), localcluster.AsObserver())
	if err != nil {
		natsconf.Stop(ns)
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	e := &environment{cfg: cfg, out: out, ns: ns, natsURL: ns.ClientURL(), nc: nc, http: localcluster.NewHTTPClient(), keyDirs: keyDirs, observers: map[bool]*observerProc{}}
	if cfg.observer != "" {
		for _, keyed := range observerKinds(cfg.algorithms) {
			o, err := e.startObserver(ctx, keyed)
			if err != nil {
				e.close()
				return nil, err
			}
			e.observers[keyed] = o
		}
	}
	return e, nil
}

// observerProc is a running observer.
type observerProc struct {
	cmd *exec.Cmd
	url string // base URL of its HTTP API
}

// observerKinds says which observers a run of algorithms needs, by
// whether they hold member keys: one without keys for the algorithms
// without them, one with the keys of the clusters of the others.
func observerKinds(algorithms []protocol.Algorithm) []bool {
	var kinds []bool
	for _, keyed := range []bool{false, true} {
		for _, a := range algorithms {
			if a.NeedsKeys() == keyed {
				kinds = append(kinds, keyed)
				break
			}
		}
	}
	return kinds
}

// observerURL is the base URL of the observer that records the clusters
// of algorithm, "" without one.
func (e *environment) observerURL(algorithm protocol.Algorithm) string {
	if o := e.observers[algorithm.NeedsKeys()]; o != nil {
		return o.url
	}
	return ""
}

// startObserver runs the observer binary on this NATS server, with the
// keys of every keyed cluster if keyed, and waits until it is healthy.
func (e *environment) startObserver(ctx context.Context, keyed bool) (*observerProc, error) {
	addr, err := freeport.Addrs(1)
	if err != nil {
		return nil, err
	}
	name := "observer"
	if keyed {
		name = "observer-keyed"
	}
	data := filepath.Join(e.cfg.logDir, name+"-data")
	logFile, err := os.Create(filepath.Join(e.cfg.logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.cfg.observer)
	// Each observer has a durable consumer of its own on the stream of
	// announcements: two on one would share its deliveries.
	cmd.Env = append(append(os.Environ(), localcluster.ObserverEnv()...), "NATS_URL="+e.natsURL, "HTTP_ADDR="+addr[0], "OBSERVER_DATA="+data, "OBSERVER_CONSUMER="+name)
	if keyed {
		dir := filepath.Join(e.cfg.logDir, "keys", name)
		if err := localcluster.ObserverKeys(dir, e.keyDirs); err != nil {
			logFile.Close()
			return nil, err
		}
		cmd.Env = append(cmd.Env, "OBSERVER_KEYS_DIR="+dir)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = localcluster.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { cmd.Wait(); logFile.Close() }() // reaped here; close kills it
	o := &observerProc{cmd: cmd, url: "http://" + addr[0]}
	// Nothing announces health but the endpoint: poll it.
	deadline := time.NewTimer(e.cfg.timeout)
	defer deadline.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.url+"/healthz", nil)
		if resp, err := e.http.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return o, nil
			}
		}
		select {
		case <-ctx.Done():
			cmd.Process.Signal(syscall.SIGTERM)
			return nil, ctx.Err()
		case <-deadline.C:
			cmd.Process.Signal(syscall.SIGTERM)
			return nil, fmt.Errorf("%s not healthy after %s; see %s", name, e.cfg.timeout, logFile.Name())
		case <-poll.C:
		}
	}
}

func (e *environment) close() {
	for _, o := range e.observers {
		o.cmd.Process.Signal(syscall.SIGTERM)
	}
	e.nc.Close()
	natsconf.Stop(e.ns)
}

// result holds the measurements of one algorithm at one size.
type result struct {
	algorithm protocol.Algorithm
	n         int
	err       error

	coldStart         time.Duration
	spawn             time.Duration // from the first process started to the last
	coldAnnouncements int
	eventNodes        int             // nodes that receive connection events
	crash, rejoin     []time.Duration // SIGKILL until the survivors agree; restart until all agree on it
	crashNoEvents     []time.Duration // the same with connection events off: heartbeats alone
	hang, unhang      []time.Duration // SIGSTOP until the others agree; SIGCONT until all agree on it
	handoff, termExit []time.Duration // SIGTERM until the survivors agree; until it exited
	badExits          int             // SIGTERMs that did not end in exit status 0

	crashMsgs, hangMsgs, handoffMsgs, rejoinMsgs []int   // publications, steady traffic excepted
	crashChecks, hangChecks, handoffChecks       []int   // signatures checked, steady traffic excepted
	idleChecks                                   float64 // signatures checked per second at idle
	crashServerIn, crashServerOut, crashBytes    []int   // at the server, all the nodes' traffic of the time
	idleSent                                     float64 // publications per second at idle, heartbeats excepted (Paxos renewals)

	idleCPU      []float64 // % of one core, per node
	rss          []int64   // bytes, per node
	steadyPerSec float64   // steady messages per second, the cluster
	observerLag  []time.Duration

	loads           []loadResult // the steady state under each load, in the order run
	termRegressions int
}

// listen subscribes w to cluster's broadcast subjects and its leader
// subject, and returns once the server has the subscriptions; the
// function it returns unsubscribes them.
func (e *environment) listen(w *wire, cluster string, algorithm protocol.Algorithm) (func(), error) {
	var subs []*nats.Subscription
	unsubscribe := func() {
		for _, sub := range subs {
			sub.Unsubscribe()
		}
	}
	for _, subject := range append(protocol.BroadcastSubjectsOf(cluster, algorithm), protocol.LeaderSubject(cluster)) {
		sub, err := e.nc.Subscribe(subject, w.handle)
		if err != nil {
			unsubscribe()
			return nil, err
		}
		subs = append(subs, sub)
	}
	if err := e.nc.Flush(); err != nil {
		unsubscribe()
		return nil, err
	}
	return unsubscribe, nil
}

// wire counts what is published on one cluster's subjects.
type wire struct {
	mu            sync.Mutex
	all           int // every message received
	messages      int // election messages: all but the steady traffic
	bytes         int // their payloads
	steady        int
	announcements int
	lastTerm      uint64
	changes       changeCounter // new terms and leaders, for the steady state
	regressions   int           // announcements whose term did not exceed the last one
	regressed     []string      // what each of them announced, and when
	restarting    bool          // the whole cluster restarts: concurrent claims are not counted
	lastActive    time.Time
	announced     chan announced // to the observer's lag, if any
	// presences are the presence broadcasts of a dynamic cluster since
	// resetPresences: part of its steady traffic, not of an election.
	presences []presenceSeen
}

// announced is a leadership seen on the leader subject, and when.
type announced struct {
	term uint64
	at   time.Time
}

// handle runs on the NATS connection's delivery goroutine.
func (w *wire) handle(m *nats.Msg) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all++
	if strings.HasSuffix(m.Subject, "."+protocol.KindLeader) {
		w.announcements++
		w.lastActive = now
		if a, err := protocol.DecodeAnnouncement(m.Data); err == nil {
			if a.Term <= w.lastTerm && !w.restarting {
				w.regressions++
				w.regressed = append(w.regressed, fmt.Sprintf("leader %d, term %d after term %d, at %s", a.Leader, a.Term, w.lastTerm, now.Format("15:04:05.000")))
			}
			w.lastTerm = max(w.lastTerm, a.Term)
			w.changes.add(a.Term, a.Leader)
			if w.announced != nil {
				select {
				case w.announced <- announced{term: a.Term, at: now}:
				default:
				}
			}
		}
		return
	}
	if strings.HasSuffix(m.Subject, "."+protocol.KindPresence) {
		if msg, err := protocol.Decode(m.Data); err == nil {
			w.presences = append(w.presences, presenceSeen{from: msg.From, at: now})
		}
		return
	}
	if msg, err := protocol.Decode(m.Data); err == nil && protocol.Steady(msg) {
		w.steady++
		return
	}
	w.messages++
	w.bytes += len(m.Data)
	w.lastActive = now
}

// resetPresences forgets the presence broadcasts received so far.
func (w *wire) resetPresences() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.presences = nil
}

// presencesSince are the presence broadcasts received after t.
func (w *wire) presencesSince(t time.Time) []presenceSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, _ := slices.BinarySearchFunc(w.presences, t, func(p presenceSeen, t time.Time) int {
		if p.at.After(t) {
			return 1
		}
		return -1
	})
	return slices.Clone(w.presences[i:])
}

// presenceFrom is the first presence broadcast of id received at or
// after t0.
func (w *wire) presenceFrom(id uint64, t0 time.Time) (presenceSeen, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.presences {
		if p.from == id && !p.at.Before(t0) {
			return p, true
		}
	}
	return presenceSeen{}, false
}

func (w *wire) setRestarting(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.restarting = on
}

// snapshot is what the wire and the server counted so far.
type snapshot struct {
	all, messages, bytes, steady, announcements int
	newTerms, moves                             int // of changeCounter
	serverIn, serverOut, serverInBytes          int64
	at                                          time.Time
}

func (e *environment) snapshot(w *wire) snapshot {
	v, _ := e.ns.Varz(nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := snapshot{all: w.all, messages: w.messages, bytes: w.bytes, steady: w.steady, announcements: w.announcements,
		newTerms: w.changes.newTerms, moves: w.changes.moves, at: time.Now()}
	if v != nil {
		s.serverIn, s.serverOut, s.serverInBytes = v.InMsgs, v.OutMsgs, v.InBytes
	}
	return s
}

func (w *wire) lastActivity() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastActive
}

// measure runs every measurement for one algorithm and size on a fresh
// cluster. On error the result holds what was measured so far.
func (e *environment) measure(ctx context.Context, algorithm protocol.Algorithm, size int) (res *result, err error) {
	res = &result{algorithm: algorithm, n: size}
	defer func() { res.err = err }()
	cluster := clusterName(algorithm, size, false)
	w := &wire{}
	if obsURL := e.observerURL(algorithm); obsURL != "" {
		w.announced = make(chan announced, 16)
		lags := make(chan []time.Duration, 1)
		go func() { lags <- e.observerLags(ctx, obsURL, cluster, w.announced) }()
		defer func() {
			close(w.announced)
			res.observerLag = <-lags
		}()
	}
	// The broadcast subjects and the leader subject only: a subscriber on
	// the query subject that never answers would make every query wait
	// its time-out, and one on the nodes' inboxes would hide from a node
	// that a peer is gone (NATS answers "no responders" only to a message
	// nobody receives). Point-to-point messages are counted by the nodes'
	// metrics instead.
	unsubscribe, err := e.listen(w, cluster, algorithm)
	if err != nil {
		return res, err
	}
	defer unsubscribe()
	defer func() {
		w.mu.Lock()
		res.termRegressions = w.regressions
		w.mu.Unlock()
	}()

	addrs, err := freeport.Addrs(size)
	if err != nil {
		return res, err
	}
	ids := make([]uint64, size)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	nodes, err := e.newNodes(localcluster.Spec{
		Binary:    e.cfg.binary,
		NATSURL:   e.natsURL,
		Cluster:   cluster,
		Algorithm: string(algorithm),
		IDs:       ids,
		HTTPAddrs: addrs,
		LogDir:    filepath.Join(e.cfg.logDir, cluster),
	})
	if err != nil {
		return res, err
	}
	defer localcluster.StopAll(nodes, stopGrace)
	v := e.follow(ctx, nodes)
	defer v.close()
	top, survivors := nodes[len(nodes)-1], nodes[:len(nodes)-1]
	next := survivors[len(survivors)-1]

	// Cold start.
	before := e.snapshot(w)
	start := time.Now()
	res.spawn, err = startAll(nodes, e.cfg.order)
	if err != nil {
		return res, err
	}
	at, err := e.waitAgreed(ctx, v, nodes, top.ID, start)
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	res.coldStart = at.Sub(start)
	if err := e.waitQuiet(ctx, w); err != nil {
		return res, err
	}
	res.coldAnnouncements = e.snapshot(w).announcements - before.announcements
	events, _ := e.sumMetric(ctx, nodes, "election_connection_events")
	res.eventNodes = int(events)
	fmt.Fprintf(e.out, "  cold start: %s (processes started within %s), %d announcements; %d of %d nodes receive connection events\n",
		ms(res.coldStart), ms(res.spawn), res.coldAnnouncements, res.eventNodes, size)

	// Idle: what a quiet cluster costs.
	if err := e.idle(ctx, res, w, nodes); err != nil {
		return res, fmt.Errorf("idle: %w", err)
	}

	// leave takes the leader down with sig, measures until the survivors
	// agree, then brings it back (SIGCONT after SIGSTOP, a new process
	// otherwise) and measures until all agree on it again.
	type leaving struct {
		took, back, exit time.Duration
		msgs, bytes      int
		checks           int
		in, out          int // at the server
	}
	leave := func(sig syscall.Signal) (l leaving, err error) {
		s0 := e.snapshot(w)
		sent0 := e.sentBy(ctx, nodes, nil)
		checks0 := e.checksBy(ctx, nodes, nil)
		t0 := time.Now()
		if err := top.Signal(sig); err != nil {
			return l, err
		}
		at, err := e.waitAgreed(ctx, v, survivors, next.ID, t0)
		if err != nil {
			return l, fmt.Errorf("after %s of leader %d: %w", sig, top.ID, err)
		}
		l.took = at.Sub(t0)
		if sig != syscall.SIGSTOP {
			exitErr := top.Wait()
			if sig == syscall.SIGTERM && exitErr != nil {
				res.badExits++
				fmt.Fprintf(e.out, "  node %d after SIGTERM: %v\n", top.ID, exitErr)
			}
			l.exit = top.ExitedAt().Sub(t0)
		}
		if err := e.waitQuiet(ctx, w); err != nil {
			return l, err
		}
		s1 := e.snapshot(w)
		// The steady traffic: none while the leader is gone (killed,
		// stopped or resigned), then the survivors' from their agreement
		// on, at its idle rate for n-1 members (a leader's round and an
		// answer from each follower; each of them checked once).
		steady := s1.at.Sub(at).Seconds()
		n := float64(size)
		l.msgs = sentDelta(sent0, e.sentBy(ctx, nodes, top), res.idleSent*(n-1)/n*steady)
		l.checks = sentDelta(checks0, e.checksBy(ctx, nodes, top), res.idleChecks*(n-2)/(n-1)*steady)
		l.bytes = int(s1.serverInBytes - s0.serverInBytes)
		// At the server: the messages the nodes published, and those it
		// delivered to them (all but those to this benchmark's
		// subscriber), steady traffic included.
		l.in = int(s1.serverIn - s0.serverIn)
		l.out = int(s1.serverOut-s0.serverOut) - (s1.all - s0.all)

		// Back.
		s0 = e.snapshot(w)
		sent0 = e.sentBy(ctx, nodes, top)
		t0 = time.Now()
		if sig == syscall.SIGSTOP {
			err = top.Signal(syscall.SIGCONT)
		} else {
			err = top.Start()
		}
		if err != nil {
			return l, err
		}
		at, err = e.waitAgreed(ctx, v, nodes, top.ID, t0)
		if err != nil {
			return l, fmt.Errorf("after the return of node %d: %w", top.ID, err)
		}
		l.back = at.Sub(t0)
		if err := e.waitQuiet(ctx, w); err != nil {
			return l, err
		}
		if sig != syscall.SIGSTOP {
			res.rejoin = append(res.rejoin, l.back)
			res.rejoinMsgs = append(res.rejoinMsgs, sentDelta(sent0, e.sentBy(ctx, nodes, nil), res.idleSent*time.Since(s0.at).Seconds()))
		}
		return l, nil
	}

	rounds := e.cfg.rounds[size]
	for round := range rounds {
		l, err := leave(syscall.SIGKILL)
		if err != nil {
			return res, fmt.Errorf("crash round %d: %w", round+1, err)
		}
		res.crash = append(res.crash, l.took)
		res.crashMsgs = append(res.crashMsgs, l.msgs)
		res.crashChecks = append(res.crashChecks, l.checks)
		res.crashBytes = append(res.crashBytes, l.bytes)
		res.crashServerIn = append(res.crashServerIn, l.in)
		res.crashServerOut = append(res.crashServerOut, l.out)
	}
	fmt.Fprintf(e.out, "  crash failover: %d rounds, p50 %s\n", len(res.crash), ms(quantile(res.crash, 0.5)))
	for round := range rounds {
		l, err := leave(syscall.SIGSTOP)
		if err != nil {
			return res, fmt.Errorf("hang round %d: %w", round+1, err)
		}
		res.hang = append(res.hang, l.took)
		res.unhang = append(res.unhang, l.back)
		res.hangMsgs = append(res.hangMsgs, l.msgs)
		res.hangChecks = append(res.hangChecks, l.checks)
	}
	fmt.Fprintf(e.out, "  hang failover: %d rounds, p50 %s\n", len(res.hang), ms(quantile(res.hang, 0.5)))
	for round := range rounds {
		l, err := leave(syscall.SIGTERM)
		if err != nil {
			return res, fmt.Errorf("hand-over round %d: %w", round+1, err)
		}
		res.handoff = append(res.handoff, l.took)
		res.termExit = append(res.termExit, l.exit)
		res.handoffMsgs = append(res.handoffMsgs, l.msgs)
		res.handoffChecks = append(res.handoffChecks, l.checks)
	}
	fmt.Fprintf(e.out, "  SIGTERM hand-over: %d rounds, p50 %s\n", len(res.handoff), ms(quantile(res.handoff, 0.5)))

	// The crashes again, with connection events off: heartbeats alone,
	// as on a NATS server that does not deliver the events.
	if res.eventNodes > 0 {
		// Every node restarts at once: its nodes may claim concurrently,
		// and their announcements cross (each above every term announced
		// before); terms not increasing are counted again once it agrees.
		w.setRestarting(true)
		for _, r := range localcluster.StopAll(nodes, stopGrace) {
			if r.Killed || r.Err != nil {
				return res, fmt.Errorf("node %d did not stop cleanly: killed=%t, %v", r.Node.ID, r.Killed, r.Err)
			}
		}
		for _, n := range nodes {
			n.Setenv("ELECTION_CONNECTION_EVENTS=off")
		}
		if _, err := startAll(nodes, e.cfg.order); err != nil {
			return res, err
		}
		if _, err := e.waitLed(ctx, v, nodes, top.ID, time.Now()); err != nil {
			return res, fmt.Errorf("restart with connection events off: %w", err)
		}
		if err := e.waitQuiet(ctx, w); err != nil {
			return res, err
		}
		w.setRestarting(false)
		for round := range rounds {
			l, err := leave(syscall.SIGKILL)
			if err != nil {
				return res, fmt.Errorf("crash round %d without connection events: %w", round+1, err)
			}
			res.crashNoEvents = append(res.crashNoEvents, l.took)
		}
		fmt.Fprintf(e.out, "  crash failover without connection events: %d rounds, p50 %s\n", len(res.crashNoEvents), ms(quantile(res.crashNoEvents, 0.5)))
	}

	for _, r := range localcluster.StopAll(nodes, stopGrace) {
		if r.Killed || r.Err != nil {
			return res, fmt.Errorf("node %d did not stop cleanly: killed=%t, %v", r.Node.ID, r.Killed, r.Err)
		}
	}
	return res, nil
}

// idle measures, over a quiet window of the converged cluster, each node's
// CPU share and resident memory and the cluster's steady messages per
// second.
func (e *environment) idle(ctx context.Context, res *result, w *wire, nodes []*localcluster.Node) error {
	var before []procstat.CPUTime
	for _, n := range nodes {
		c, err := procstat.ReadCPU(n.Pid())
		if err != nil {
			return err
		}
		before = append(before, c)
	}
	s0 := e.snapshot(w)
	sent0 := e.sentBy(ctx, nodes, nil)
	checks0 := e.checksBy(ctx, nodes, nil)
	timer := time.NewTimer(e.cfg.idle)
	select {
	case <-ctx.Done():
		timer.Stop()
		return ctx.Err()
	case <-timer.C:
	}
	s1 := e.snapshot(w)
	for i, n := range nodes {
		c, err := procstat.ReadCPU(n.Pid())
		if err != nil {
			return err
		}
		res.idleCPU = append(res.idleCPU, c.Share(before[i]))
		rss, err := procstat.ReadRSS(n.Pid())
		if err != nil {
			return err
		}
		res.rss = append(res.rss, rss)
	}
	res.steadyPerSec = float64(s1.steady-s0.steady) / s1.at.Sub(s0.at).Seconds()
	res.idleSent = float64(sentDelta(sent0, e.sentBy(ctx, nodes, nil), 0)) / s1.at.Sub(s0.at).Seconds()
	res.idleChecks = float64(sentDelta(checks0, e.checksBy(ctx, nodes, nil), 0)) / s1.at.Sub(s0.at).Seconds()
	fmt.Fprintf(e.out, "  idle: %.2f%% of a core and %.1f MiB per node (mean), %.0f steady messages/s\n",
		meanFloat(res.idleCPU), float64(meanInt(res.rss))/(1<<20), res.steadyPerSec)
	return nil
}

// observerLags measures, for every announcement of cluster, how long the
// observer at obsURL took to record it, until the channel closes.
func (e *environment) observerLags(ctx context.Context, obsURL, cluster string, ch <-chan announced) []time.Duration {
	var lags []time.Duration
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for a := range ch {
		// The record has no notification of its own here: poll for it.
		deadline := a.at.Add(2 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			var rec struct {
				Term uint64 `json:"term"`
			}
			if err := localcluster.GetJSON(ctx, e.http, obsURL+"/api/clusters/"+cluster+"/leader", &rec); err == nil && rec.Term >= a.term {
				lags = append(lags, time.Since(a.at))
				break
			}
			<-poll.C
		}
	}
	return lags
}

// steadyState runs one cluster per algorithm at once, each at the
// smallest size measured of it, lets each converge, then, for each load
// of -load in turn, loads the host for the steady duration (load.go) and
// counts, per cluster, the spurious leader changes meanwhile (no member
// fails): the new terms announced, the elections started and the leader
// changes the nodes counted. None is expected. It records them in the
// results of that algorithm and size.
func (e *environment) steadyState(ctx context.Context, results []*result) error {
	type cluster struct {
		res                  *result
		w                    *wire
		nodes                []*localcluster.Node
		top                  uint64
		elections0, changes0 float64
		s0                   snapshot
	}
	var clusters []*cluster
	defer func() {
		for _, c := range clusters {
			localcluster.StopAll(c.nodes, stopGrace)
		}
	}()
	for _, res := range results {
		size := res.n
		if size != e.cfg.plan[res.algorithm][0] || res.err != nil {
			continue
		}
		name := clusterName(res.algorithm, size, true)
		w := &wire{}
		sub, err := e.nc.Subscribe(protocol.LeaderSubject(name), w.handle)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		addrs, err := freeport.Addrs(size)
		if err != nil {
			return err
		}
		ids := make([]uint64, size)
		for i := range ids {
			ids[i] = uint64(i + 1)
		}
		nodes, err := e.newNodes(localcluster.Spec{
			Binary: e.cfg.binary, NATSURL: e.natsURL, Cluster: name, Algorithm: string(res.algorithm),
			IDs: ids, HTTPAddrs: addrs, LogDir: filepath.Join(e.cfg.logDir, name),
		})
		if err != nil {
			return err
		}
		c := &cluster{res: res, w: w, nodes: nodes, top: ids[size-1]}
		clusters = append(clusters, c)
		if _, err := startAll(nodes, e.cfg.order); err != nil {
			return err
		}
	}
	for _, c := range clusters {
		v := e.follow(ctx, c.nodes)
		_, err := e.waitAgreed(ctx, v, c.nodes, c.top, time.Now())
		v.close()
		if err != nil {
			return fmt.Errorf("%s: %w", c.res.algorithm, err)
		}
	}
	var sizes []string
	var pids []int
	for _, c := range clusters {
		sizes = append(sizes, fmt.Sprintf("%s %d", c.res.algorithm, len(c.nodes)))
		for _, n := range c.nodes {
			pids = append(pids, n.Pid())
		}
	}
	for _, kind := range e.cfg.loads {
		for _, c := range clusters {
			if err := e.waitQuiet(ctx, c.w); err != nil {
				return err
			}
			c.elections0, _ = e.sumMetric(ctx, c.nodes, "election_elections_started_total")
			c.changes0, _ = e.sumMetric(ctx, c.nodes, "election_leader_changes_total")
			c.s0 = e.snapshot(c.w)
		}
		var rs *raftSteady
		if e.cfg.raftcheck != "" {
			var err error
			if rs, err = startRaftSteady(ctx, e.cfg, kind); err != nil {
				fmt.Fprintf(e.out, "bench: steady state, load %s: hashicorp/raft: %v\n", kind, err)
				e.raftLoads = append(e.raftLoads, raftLoad{Kind: kind, Err: err.Error()})
			}
		}
		notes, err := e.underLoad(ctx, kind, sizes, pids)
		if rs != nil {
			if err != nil {
				rs.stop()
				return err
			}
			l := rs.finish(kind, e.cfg.timeout)
			e.raftLoads = append(e.raftLoads, l)
			fmt.Fprintf(e.out, "  hashicorp/raft 150ms 5: spurious leader changes %s\n", l)
		}
		if err != nil {
			return err
		}
		for _, c := range clusters {
			elections1, _ := e.sumMetric(ctx, c.nodes, "election_elections_started_total")
			changes1, _ := e.sumMetric(ctx, c.nodes, "election_leader_changes_total")
			s1 := e.snapshot(c.w)
			lr := loadResult{
				kind:      kind,
				note:      strings.Join(notes, "; "),
				elections: int(elections1 - c.elections0),
				changes:   int(changes1 - c.changes0),
				announced: s1.announcements - c.s0.announcements,
				newTerms:  s1.newTerms - c.s0.newTerms,
				moves:     s1.moves - c.s0.moves,
			}
			for _, n := range c.nodes {
				if !n.Running() {
					lr.failed = true // not spurious: a member failed
				}
			}
			c.res.loads = append(c.res.loads, lr)
			fmt.Fprintf(e.out, "  %s: %s\n", c.res.algorithm, lr)
		}
	}
	return nil
}

// underLoad loads the host with the loaders of kind for the steady
// duration, throttling the processes pids for the cgroup load, and stops
// them (killed, waited for, their files removed) before it returns, also
// on an error or an interrupt. The notes say what the machine did not
// allow.
func (e *environment) underLoad(ctx context.Context, kind string, sizes []string, pids []int) ([]string, error) {
	ld, err := startLoad(ctx, loadSpec{
		kind:  kind,
		dir:   filepath.Join(e.cfg.logDir, "load-fsync"),
		until: time.Now().Add(e.cfg.steady + loaderGrace),
		pids:  pids,
	})
	if err != nil {
		return nil, err
	}
	defer ld.stop()
	fmt.Fprintf(e.out, "bench: steady state, load %s: %s for %s, %d loader processes\n", kind, strings.Join(sizes, ", "), e.cfg.steady, len(ld.cmds))
	for _, n := range ld.notes {
		fmt.Fprintf(e.out, "bench: steady state, load %s: %s\n", kind, n)
	}
	timer := time.NewTimer(e.cfg.steady)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
	ld.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return ld.notes, nil
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

// Orders in which startAll starts a cluster's processes.
const (
	orderIDs     = "ids"     // lowest ID first, one at a time
	orderShuffle = "shuffle" // a random order, several at a time
)

// spawners bounds the processes being started at once in the shuffled
// order.
const spawners = 4

// startAll starts the nodes' processes in the given order and returns how
// long that took, from the first start to the last. In ID order every node
// that comes up is the highest so far: the worst case for Bully's
// announcements, and the order in which a StatefulSet starts its pods.
func startAll(nodes []*localcluster.Node, order string) (time.Duration, error) {
	begin := time.Now()
	if order == orderIDs {
		for _, n := range nodes {
			if err := n.Start(); err != nil {
				return time.Since(begin), err
			}
		}
		return time.Since(begin), nil
	}
	shuffled := slices.Clone(nodes)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan *localcluster.Node)
	for range spawners {
		wg.Go(func() {
			for n := range next {
				if err := n.Start(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range shuffled {
		next <- n
	}
	close(next)
	wg.Wait()
	return time.Since(begin), errors.Join(errs...)
}

// sentBy reads from the /metrics of each running node but skip the
// election messages it has published, heartbeats excepted.
func (e *environment) sentBy(ctx context.Context, nodes []*localcluster.Node, skip *localcluster.Node) map[uint64]float64 {
	const name = "election_messages_sent_total"
	return e.readBy(ctx, nodes, skip, func(m localcluster.Metrics) float64 {
		return m.Sum(name) - m[name+`{type="`+string(protocol.TypeHeartbeat)+`"}`]
	})
}

// checksBy reads from the /metrics of each running node but skip the
// signatures it has checked.
func (e *environment) checksBy(ctx context.Context, nodes []*localcluster.Node, skip *localcluster.Node) map[uint64]float64 {
	return e.readBy(ctx, nodes, skip, func(m localcluster.Metrics) float64 { return m.Sum("election_signature_checks_total") })
}

// readBy reads value from the /metrics of each running node but skip.
func (e *environment) readBy(ctx context.Context, nodes []*localcluster.Node, skip *localcluster.Node, value func(localcluster.Metrics) float64) map[uint64]float64 {
	out := make(map[uint64]float64, len(nodes))
	for _, n := range nodes {
		if n == skip || !n.Running() {
			continue
		}
		m, err := localcluster.FetchMetrics(ctx, e.http, n.HTTPAddr)
		if err != nil {
			continue
		}
		out[n.ID] = value(m)
	}
	return out
}

// sentDelta is how many messages the nodes published between two sentBy
// readings, less steady traffic: a node missing from after is not
// counted (it crashed or hangs and sends nothing), one whose count went
// down restarted and counts from zero.
func sentDelta(before, after map[uint64]float64, steady float64) int {
	var total float64
	for id, v := range after {
		if b, ok := before[id]; ok && b <= v {
			v -= b
		}
		total += v
	}
	return max(0, int(total-steady+0.5))
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
