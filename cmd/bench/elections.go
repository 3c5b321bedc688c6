package main

// Many elections: five node processes, each in the same n elections
// (ELECTION_CLUSTERS, node.Group), for each n of -elections. See
// measureElections.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/freeport"
	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/cmd/internal/procstat"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// singleRounds is how many failovers the run at 1 election measures,
// for the p90 the larger runs compare with: one election gives one
// time per failover.
const singleRounds = 10

// manyMembers is the number of node processes of the many-elections
// section; each takes part in every election.
const manyMembers = 5

// defaultElections are the numbers of elections the default benchmark
// measures (-elections' default): those this 2-core machine runs beside
// everything else in a few seconds each. 1000 and 10000 are for
// -elections.
const defaultElections = "1,100"

// manyAlgorithms are the algorithms of algorithms that the many-elections
// section measures: byzantine's member keys are per cluster, which many
// elections do not implement with member credentials.
func manyAlgorithms(algorithms []protocol.Algorithm) []protocol.Algorithm {
	var out []protocol.Algorithm
	for _, a := range algorithms {
		if !a.NeedsKeys() {
			out = append(out, a)
		}
	}
	return out
}

// parseElections reads -elections: "none", or lists of numbers of
// elections separated by ";", "n,n,…" for every algorithm without a list
// of its own, "algorithm=n,n,…" for one. Each list comes back ascending.
func parseElections(s string) (every []int, own map[protocol.Algorithm][]int, err error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil, nil
	}
	own = map[protocol.Algorithm][]int{}
	for group := range strings.SplitSeq(s, ";") {
		group = strings.TrimSpace(group)
		if group == "" {
			continue
		}
		name, list, named := strings.Cut(group, "=")
		if !named {
			list = group
		}
		var ns []int
		for f := range strings.SplitSeq(list, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 16384 {
				return nil, nil, fmt.Errorf("-elections: %q is not a number of elections from 1 to 16384", f)
			}
			if slices.Contains(ns, n) {
				return nil, nil, fmt.Errorf("-elections: %d twice", n)
			}
			ns = append(ns, n)
		}
		slices.Sort(ns)
		if !named {
			if every != nil {
				return nil, nil, fmt.Errorf("-elections: two lists without an algorithm")
			}
			every = ns
			continue
		}
		alg := protocol.Algorithm(strings.TrimSpace(name))
		if !slices.Contains(protocol.Algorithms, alg) || alg.NeedsKeys() {
			return nil, nil, fmt.Errorf("-elections: %q is not bully, ring or paxos", alg)
		}
		if _, dup := own[alg]; dup {
			return nil, nil, fmt.Errorf("-elections: two lists for %s", alg)
		}
		own[alg] = ns
	}
	return every, own, nil
}

// manyBound is how long n elections may take to agree, at the start or
// after the failover: bound, or 30 ms per election if that is more.
func manyBound(bound time.Duration, n int) time.Duration {
	return max(bound, time.Duration(n)*30*time.Millisecond)
}

// manyPoll is how often the benchmark reads every process's /elections
// while it waits: the answer grows with n (about 120 bytes an election,
// a megabyte at 10,000, whose encoding costs the processes measured),
// so it is read less often the more elections there are. The failover's
// times come from the statuses' since, not from the poll.
func manyPoll(n int) time.Duration {
	return min(time.Second, 5*time.Millisecond+time.Duration(n)*100*time.Microsecond)
}

// manyResult is what the many-elections section measured for one
// algorithm at n elections.
type manyResult struct {
	algorithm protocol.Algorithm
	n         int
	err       error
	bound     time.Duration // the bound of the start and the failover
	poll      time.Duration

	start       time.Duration // until every election had an agreed leader
	leaders     []int         // election_is_leader of each process after the start
	cpu         []float64     // % of one core, per process, at idle
	rss         []int64       // bytes, per process, at idle
	benchCPU    float64       // % of one core: this process, the NATS server's, at idle
	serverIn    float64       // messages/s the NATS server received, at idle
	serverOut   float64       // messages/s it delivered, at idle
	sent        float64       // election messages/s the processes sent (all types), at idle
	batches     float64       // batches/s sent, at idle
	batched     float64       // messages/s sent within batches, at idle
	loadAvg     string        // /proc/loadavg at the end of the idle window
	killed      uint64        // the process killed
	led         int           // the elections it led
	failover    []time.Duration
	unagreed    int    // elections still without an agreed new leader at the bound
	stopped     string // why the run stopped early (memory), "" if it did not
	observerLag []float64
	lagCount    int
}

// label names a result in progress lines.
func (r *manyResult) label() string {
	return fmt.Sprintf("%s, %d elections", r.algorithm, r.n)
}

// manyProc is one node process of the many-elections section.
type manyProc struct {
	id     uint64
	addr   string
	binary string
	env    []string
	log    string
	p      *localcluster.Process
}

func (m *manyProc) start() error {
	p, err := localcluster.StartProcess(m.binary, m.log, m.env)
	if err != nil {
		return err
	}
	m.p = p
	return nil
}

func (m *manyProc) running() bool {
	if m.p == nil {
		return false
	}
	select {
	case <-m.p.Done():
		return false
	default:
		return true
	}
}

// manyHTTP is the client of /elections and /metrics: the answer is
// large with many elections, and a loaded process may take seconds to
// give it.
var manyHTTP = &http.Client{
	Timeout: 20 * time.Second,
	Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
	},
}

// elections reads a process's /elections: the leader of each election
// by its name, and since when the process has named it (its status's
// since, when there is one).
func (m *manyProc) elections(ctx context.Context) (map[string]uint64, map[string]time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.addr+"/elections", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := manyHTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, nil, fmt.Errorf("GET /elections of node %d: %s", m.id, resp.Status)
	}
	var st []protocol.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, nil, fmt.Errorf("GET /elections of node %d: %w", m.id, err)
	}
	out := make(map[string]uint64, len(st))
	since := make(map[string]time.Time, len(st))
	for _, s := range st {
		if s.Leader != nil {
			out[s.Cluster] = *s.Leader
			if s.Since != nil {
				since[s.Cluster] = *s.Since
			}
		}
	}
	return out, since, nil
}

// readAll reads /elections of every process of ps at once: the leaders
// each names, since when, and the time when the last answer arrived. A
// process that does not answer has no maps (nil).
func readAll(ctx context.Context, ps []*manyProc) ([]map[string]uint64, []map[string]time.Time, time.Time) {
	views := make([]map[string]uint64, len(ps))
	since := make([]map[string]time.Time, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			if v, s, err := p.elections(ctx); err == nil {
				views[i], since[i] = v, s
			}
		})
	}
	wg.Wait()
	return views, since, time.Now()
}

// agreedSince is when the last of the processes came to name the leader
// of election c that they agree on: the latest since of their views, if
// each has one after t0; otherwise at, when the poll saw it.
func agreedSince(since []map[string]time.Time, c string, t0, at time.Time) time.Time {
	var last time.Time
	for _, s := range since {
		t, ok := s[c]
		if !ok || t.Before(t0) || t.After(at) {
			return at
		}
		if t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return at
	}
	return last
}

// agreedLeader is the leader every view names for election c, if they
// all name the same one and it is not excluded.
func agreedLeader(views []map[string]uint64, c string, excluded uint64) (uint64, bool) {
	var leader uint64
	for i, v := range views {
		l, ok := v[c]
		if !ok || l == excluded || (i > 0 && l != leader) {
			return 0, false
		}
		leader = l
	}
	return leader, len(views) > 0
}

// manyNames are the names of n elections of algorithm: the list that
// ELECTION_CLUSTERS gives, and each name.
func manyNames(algorithm protocol.Algorithm, n int) (string, []string) {
	prefix := fmt.Sprintf("many-%s-%d-", algorithm, n)
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	if n == 1 {
		// One cluster: ELECTION_CLUSTERS with one name, so that the
		// node runs as a group as at every other n.
		return names[0], names
	}
	return fmt.Sprintf("%s{0..%d}", prefix, n-1), names
}

// measureElections measures n elections of algorithm over manyMembers
// node processes with the default settings:
//
//   - start: every process started at once, until every election has an
//     agreed leader (every process's /elections names the same one);
//     then the leaders per process (election_is_leader);
//   - idle: after a settling pause, over the -idle window: each
//     process's CPU share and resident memory, this process's CPU (it
//     runs the NATS server), the server's messages in and out per
//     second (its varz), and the processes' messages, batches and
//     batched messages per second (their /metrics);
//   - failover: SIGKILL of the process that leads the most elections,
//     then, for each election it led, the time until every survivor
//     names the same new leader; and the observer's record lag over
//     it, from its histogram.
//
// With one election, the failover is repeated (the killed process
// restarted, agreement awaited, the leader killed again) for rounds
// samples. On error the result holds what was measured so far.
func (e *environment) measureElections(ctx context.Context, algorithm protocol.Algorithm, n, rounds int) (res *manyResult, err error) {
	res = &manyResult{algorithm: algorithm, n: n, bound: manyBound(e.cfg.timeout, n), poll: manyPoll(n)}
	defer func() { res.err = err }()
	list, names := manyNames(algorithm, n)
	addrs, err := freeport.Addrs(manyMembers)
	if err != nil {
		return res, err
	}
	peers := make([]string, manyMembers)
	for i := range peers {
		peers[i] = strconv.Itoa(i + 1)
	}
	dir := filepath.Join(e.cfg.logDir, fmt.Sprintf("many-%s-%d", algorithm, n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	procs := make([]*manyProc, manyMembers)
	for i := range procs {
		id := uint64(i + 1)
		procs[i] = &manyProc{
			id: id, addr: addrs[i], binary: e.cfg.binary, log: filepath.Join(dir, fmt.Sprintf("node-%d.log", id)),
			env: append(localcluster.NodeEnv(),
				"NATS_URL="+e.natsURL,
				"NODE_ID="+strconv.FormatUint(id, 10),
				"NODE_PEERS="+strings.Join(peers, ","),
				"ELECTION_ALGORITHM="+string(algorithm),
				"ELECTION_CLUSTERS="+list,
				"ELECTION_RANK=spread",
				"HTTP_ADDR="+addrs[i],
				"ELECTION_DATA="+filepath.Join(dir, fmt.Sprintf("data-%d", id)),
			),
		}
	}
	defer func() {
		for _, p := range procs {
			if p.running() {
				p.p.Stop(stopGrace)
			}
		}
	}()

	// Start.
	t0 := time.Now()
	for _, p := range procs {
		if err := p.start(); err != nil {
			return res, err
		}
	}
	leaders, at, err := e.waitMany(ctx, res, "start", procs, names, 0, t0)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, errShortOfMemory) {
			// What the processes cost while they do not settle.
			if ierr := e.manyIdle(ctx, res, procs); ierr != nil {
				fmt.Fprintf(e.out, "  idle, not settled: %v\n", ierr)
			}
		}
		return res, err
	}
	res.start = at.Sub(t0)
	// Settle: the elections' last messages, the processes' first garbage
	// collections, and for Bully and the ring the frequent heartbeats
	// after each claim, until they are quiet.
	if err := sleepCtx(ctx, manySettle(algorithm)); err != nil {
		return res, err
	}
	for _, p := range procs {
		m, err := fetchMetricsURL(ctx, "http://"+p.addr+"/metrics")
		if err != nil {
			return res, fmt.Errorf("metrics of node %d: %w", p.id, err)
		}
		res.leaders = append(res.leaders, int(m.Sum("election_is_leader")))
	}
	fmt.Fprintf(e.out, "  start: every election agreed after %s; leaders per process %v\n", ms(res.start), res.leaders)

	// Idle.
	if err := e.manyIdle(ctx, res, procs); err != nil {
		return res, fmt.Errorf("idle: %w", err)
	}

	// Failover.
	var lag0 localcluster.Metrics
	if o := e.observerURL(algorithm); o != "" {
		var err error
		if lag0, err = fetchMetricsURL(ctx, o+"/metrics"); err != nil {
			fmt.Fprintf(e.out, "  observer: its metrics before the failover: %v (no lag measured)\n", err)
		}
	}
	for round := range rounds {
		victim := procs[0]
		count := map[uint64]int{}
		for _, l := range leaders {
			count[l]++
		}
		for _, p := range procs {
			if count[p.id] > count[victim.id] {
				victim = p
			}
		}
		var led []string
		for _, c := range names {
			if leaders[c] == victim.id {
				led = append(led, c)
			}
		}
		res.killed, res.led = victim.id, len(led)
		var survivors []*manyProc
		for _, p := range procs {
			if p != victim {
				survivors = append(survivors, p)
			}
		}
		t0 := time.Now()
		if err := syscall.Kill(victim.p.Pid(), syscall.SIGKILL); err != nil {
			return res, err
		}
		took, unagreed, err := e.waitFailover(ctx, res, survivors, led, victim.id, t0)
		res.failover = append(res.failover, took...)
		res.unagreed += unagreed
		<-victim.p.Done()
		if err != nil {
			return res, err
		}
		if round == rounds-1 {
			break
		}
		// Back: the killed process restarts, and all agree again.
		if err := victim.start(); err != nil {
			return res, err
		}
		if leaders, _, err = e.waitMany(ctx, res, "rejoin", procs, names, 0, time.Now()); err != nil {
			return res, err
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(e.out, "  failover: node %d led %d; agreed again p50 %s, p90 %s, max %s\n",
		res.killed, res.led, ms(quantile(res.failover, 0.5)), ms(quantile(res.failover, 0.9)), ms(quantile(res.failover, 1)))
	if o := e.observerURL(algorithm); o != "" && lag0 != nil {
		// The observer records the new leaderships shortly after.
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return res, err
		}
		if lag1, err := fetchMetricsURL(ctx, o+"/metrics"); err == nil {
			h := histogramDelta(lag0, lag1, "observer_record_lag_seconds")
			res.lagCount = int(h.count)
			res.observerLag = []float64{h.quantile(0.5), h.quantile(0.9)}
		} else {
			fmt.Fprintf(e.out, "  observer: its metrics after the failover: %v (no lag measured)\n", err)
		}
	}
	return res, nil
}

// manyIdle measures res's idle figures over the -idle window.
// manySettle is how long a run waits after the start agreed before it
// measures the idle processes: 3 s, and for Bully and the ring the ten
// heartbeats a leader sends every second after its claim before it goes
// quiet (node.BeatBackstop times the default interval, for
// election.QuietAfter heartbeats).
func manySettle(algorithm protocol.Algorithm) time.Duration {
	settle := 3 * time.Second
	if algorithm == protocol.Bully || algorithm == protocol.Ring {
		settle += time.Duration(election.QuietAfter*node.BeatBackstop*election.DefaultHeartbeatTicks) * node.DefaultTick
	}
	return settle
}

func (e *environment) manyIdle(ctx context.Context, res *manyResult, procs []*manyProc) error {
	counters := func() (sent, batches, batched float64) {
		for _, p := range procs {
			m, err := fetchMetricsURL(ctx, "http://"+p.addr+"/metrics")
			if err != nil {
				continue
			}
			sent += m.Sum("election_messages_sent_total")
			batches += m.Sum("election_batches_sent_total")
			batched += m.Sum("election_batched_messages_total")
		}
		return
	}
	var before []procstat.CPUTime
	for _, p := range procs {
		c, err := procstat.ReadCPU(p.p.Pid())
		if err != nil {
			return err
		}
		before = append(before, c)
	}
	self0, err := procstat.ReadCPU(os.Getpid())
	if err != nil {
		return err
	}
	v0, _ := e.ns.Varz(nil)
	sent0, batches0, batched0 := counters()
	t0 := time.Now()
	if err := sleepCtx(ctx, e.cfg.idle); err != nil {
		return err
	}
	for i, p := range procs {
		c, err := procstat.ReadCPU(p.p.Pid())
		if err != nil {
			return err
		}
		res.cpu = append(res.cpu, c.Share(before[i]))
		rss, err := procstat.ReadRSS(p.p.Pid())
		if err != nil {
			return err
		}
		res.rss = append(res.rss, rss)
	}
	self1, _ := procstat.ReadCPU(os.Getpid())
	res.benchCPU = self1.Share(self0)
	v1, _ := e.ns.Varz(nil)
	sent1, batches1, batched1 := counters()
	wall := time.Since(t0).Seconds()
	if v0 != nil && v1 != nil {
		res.serverIn = float64(v1.InMsgs-v0.InMsgs) / wall
		res.serverOut = float64(v1.OutMsgs-v0.OutMsgs) / wall
	}
	res.sent = (sent1 - sent0) / wall
	res.batches = (batches1 - batches0) / wall
	res.batched = (batched1 - batched0) / wall
	res.loadAvg = loadAvg()
	fmt.Fprintf(e.out, "  idle: %.1f%% of a core and %.1f MiB per process (mean); server %.0f in/s, %.0f out/s; %.0f sent/s, %.0f batches/s; load %s\n",
		meanFloat(res.cpu), float64(meanInt(res.rss))/(1<<20), res.serverIn, res.serverOut, res.sent, res.batches, res.loadAvg)
	return nil
}

// waitMany waits until every process of procs names the same leader,
// other than excluded, for every election of names, and returns the
// leaders and when the agreement was seen.
func (e *environment) waitMany(ctx context.Context, res *manyResult, what string, procs []*manyProc, names []string, excluded uint64, t0 time.Time) (map[string]uint64, time.Time, error) {
	deadline := t0.Add(res.bound)
	nextLine := t0.Add(5 * time.Second)
	for {
		if err := res.guardMemory(procs, t0); err != nil {
			return nil, time.Now(), err
		}
		views, _, at := readAll(ctx, procs)
		leaders := make(map[string]uint64, len(names))
		without, split := 0, 0
		example := ""
		for _, c := range names {
			if l, ok := agreedLeader(views, c, excluded); ok {
				leaders[c] = l
				continue
			}
			if example == "" {
				example = viewsOf(views, procs, c)
			}
			none := false
			for _, v := range views {
				if _, ok := v[c]; !ok {
					none = true
				}
			}
			if none {
				without++
			} else {
				split++
			}
		}
		if len(leaders) == len(names) {
			return leaders, at, nil
		}
		answered := 0
		for _, v := range views {
			if v != nil {
				answered++
			}
		}
		status := fmt.Sprintf("%d of %d elections agreed, %d without a leader at some process, %d split; %d of %d processes answer; e.g. %s", len(leaders), len(names), without, split, answered, len(procs), example)
		if at.After(deadline) {
			return nil, at, fmt.Errorf("%s: %d elections not agreed after %s: %s", what, len(names)-len(leaders), res.bound, status)
		}
		if at.After(nextLine) {
			fmt.Fprintf(os.Stderr, "bench: %s, %s: %s after %s; RSS %s, load %s\n", res.label(), what, status, at.Sub(t0).Round(time.Second), procsMemory(procs), loadAvg())
			nextLine = at.Add(5 * time.Second)
		}
		if err := sleepCtx(ctx, res.poll); err != nil {
			return nil, at, err
		}
	}
}

// waitFailover waits until the survivors agree on a new leader, other
// than killed, for each election of led, and returns each one's time
// from t0 and how many did not agree by the bound.
func (e *environment) waitFailover(ctx context.Context, res *manyResult, survivors []*manyProc, led []string, killed uint64, t0 time.Time) ([]time.Duration, int, error) {
	pending := slices.Clone(led)
	var took []time.Duration
	deadline := t0.Add(res.bound)
	nextLine := t0.Add(5 * time.Second)
	for len(pending) > 0 {
		if err := sleepCtx(ctx, res.poll); err != nil {
			return took, len(pending), err
		}
		if err := res.guardMemory(survivors, t0); err != nil {
			return took, len(pending), err
		}
		views, since, at := readAll(ctx, survivors)
		pending = slices.DeleteFunc(pending, func(c string) bool {
			if _, ok := agreedLeader(views, c, killed); ok {
				took = append(took, agreedSince(since, c, t0, at).Sub(t0))
				return true
			}
			return false
		})
		if len(pending) == 0 {
			break
		}
		if at.After(deadline) {
			return took, len(pending), fmt.Errorf("failover: %d of the %d elections node %d led not agreed after %s", len(pending), len(led), killed, res.bound)
		}
		if at.After(nextLine) {
			fmt.Fprintf(os.Stderr, "bench: %s, failover: %d of %d elections agreed on a new leader after %s\n", res.label(), len(took), len(led), at.Sub(t0).Round(time.Second))
			nextLine = at.Add(5 * time.Second)
		}
	}
	return took, 0, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// loadAvg is the first three fields of /proc/loadavg, "" if unreadable.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// fetchMetricsURL reads the Prometheus metrics at url.
func fetchMetricsURL(ctx context.Context, url string) (localcluster.Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := manyHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return localcluster.ParseMetrics(string(body)), nil
}

// manyElections measures the many-elections section: each algorithm of
// manyAlgorithms at each number of cfg.elections, fewest first. The
// error names the measurements that are incomplete; the results hold
// what was measured of them.
//
// done, if not nil, is called with the results so far after each run.
func (e *environment) manyElections(ctx context.Context, done func([]*manyResult)) ([]*manyResult, error) {
	var all []*manyResult
	var failed []string
	// Fewest elections first, every algorithm at each: the largest,
	// the likeliest not to settle, last.
	var ns []int
	for _, a := range manyAlgorithms(e.cfg.algorithms) {
		for _, n := range e.cfg.electionsOf(a) {
			if !slices.Contains(ns, n) {
				ns = append(ns, n)
			}
		}
	}
	slices.Sort(ns)
	for _, n := range ns {
		for _, a := range manyAlgorithms(e.cfg.algorithms) {
			if !slices.Contains(e.cfg.electionsOf(a), n) {
				continue
			}
			if ctx.Err() != nil {
				return all, ctx.Err()
			}
			rounds := 1
			if n == 1 {
				rounds = singleRounds
			}
			fmt.Fprintf(e.out, "bench: %s, %d elections over %d processes\n", a, n, manyMembers)
			res, err := e.measureElections(ctx, a, n, rounds)
			if err != nil {
				fmt.Fprintf(e.out, "bench: %s: %v\n", res.label(), err)
				failed = append(failed, fmt.Sprintf("%s/%d elections", a, n))
			}
			all = append(all, res)
			if done != nil {
				done(e.cfg.byAlgorithm(all))
			}
		}
	}
	all = e.cfg.byAlgorithm(all)
	if len(failed) > 0 {
		return all, errors.New(strings.Join(failed, ", "))
	}
	return all, nil
}

// electionsOf are the numbers of elections of the many-elections
// section for algorithm.
func (c config) electionsOf(algorithm protocol.Algorithm) []int {
	if ns, ok := c.electionsOwn[algorithm]; ok {
		return ns
	}
	return c.elections
}

// viewsOf says what each process names as the leader of election c, as
// "c: node 1 → 4, node 2 → none, …".
func viewsOf(views []map[string]uint64, procs []*manyProc, c string) string {
	parts := make([]string, len(views))
	for i, v := range views {
		switch l, ok := v[c]; {
		case v == nil:
			parts[i] = fmt.Sprintf("node %d → no answer", procs[i].id)
		case !ok:
			parts[i] = fmt.Sprintf("node %d → none", procs[i].id)
		default:
			parts[i] = fmt.Sprintf("node %d → %d", procs[i].id, l)
		}
	}
	return c + ": " + strings.Join(parts, ", ")
}

// byAlgorithm orders results as the table shows them: by algorithm (in
// the order of -algorithms), then by number of elections.
func (c config) byAlgorithm(results []*manyResult) []*manyResult {
	out := slices.Clone(results)
	slices.SortStableFunc(out, func(a, b *manyResult) int {
		if d := slices.Index(c.algorithms, a.algorithm) - slices.Index(c.algorithms, b.algorithm); d != 0 {
			return d
		}
		return a.n - b.n
	})
	return out
}

// procsMemory is the resident memory of the running processes of
// procs, in MiB, for the progress lines.
func procsMemory(procs []*manyProc) string {
	var parts []string
	for _, p := range procs {
		if !p.running() {
			continue
		}
		if rss, err := procstat.ReadRSS(p.p.Pid()); err == nil {
			parts = append(parts, strconv.FormatInt(rss>>20, 10))
		}
	}
	return strings.Join(parts, "/") + " MiB"
}

// memoryFloor is the memory the machine keeps available while many
// elections run: below it, the run stops its processes rather than let
// the machine run out (it is shared).
const memoryFloor = 4 << 30

// errShortOfMemory ends a run whose processes took the machine's
// memory below memoryFloor.
var errShortOfMemory = errors.New("stopped: the machine was short of memory")

// guardMemory returns errShortOfMemory, with what the processes held,
// once the machine has less than memoryFloor available; it records their
// resident memory then in res.
func (r *manyResult) guardMemory(procs []*manyProc, t0 time.Time) error {
	avail := memAvailable()
	if avail == 0 || avail >= memoryFloor {
		return nil
	}
	r.rss = r.rss[:0]
	for _, p := range procs {
		if rss, err := procstat.ReadRSS(p.p.Pid()); err == nil {
			r.rss = append(r.rss, rss)
		}
	}
	r.stopped = fmt.Sprintf("stopped after %s: %d MiB available", time.Since(t0).Round(time.Second), avail>>20)
	return fmt.Errorf("%w after %s: %d MiB available, the processes held %s", errShortOfMemory, time.Since(t0).Round(time.Second), avail>>20, procsMemory(procs))
}
