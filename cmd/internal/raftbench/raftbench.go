// Package raftbench measures the crash failover of hashicorp/raft clusters
// made of raftpeer processes on loopback, for the benchmark to set beside
// baton's own clusters.
//
// MeasureCrash starts N peers (the raftpeer binary it is given; it builds
// nothing), waits until every peer names the same leader, and then, per
// round, SIGKILLs the leader and takes the time from just before the kill
// until every survivor names the same new leader. The instant a survivor
// names it is the peer's own timestamp on its "leader" line, so pipe and
// scheduling delays in this process do not count; the peers and this
// process share the machine's clock. After each round the killed peer is
// started again with the same ID and address (and, since raftpeer keeps its
// state in memory, empty) and the round ends when all N peers agree again.
//
// MeasureSteady starts N peers likewise and, once they agree, counts the
// leader changes of the quiet cluster over a window: the leadership moving
// to another peer, and a peer losing the leader.
//
// Every wait is bounded by Config.Wait; an error names the peers that
// disagree. Every process started is stopped (SIGTERM, then SIGKILL) before
// MeasureCrash or MeasureSteady returns, also when ctx ends; on Linux the kernel kills the
// peers if this process dies first.
package raftbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/freeport"
)

// Timing variants, passed to raftpeer's -timeouts.
const (
	// TimeoutsDefault is raft.DefaultConfig(): 1 s heartbeat and election
	// timeouts, 500 ms leader lease.
	TimeoutsDefault = "default"
	// Timeouts150ms sets the heartbeat, election and leader lease timeouts
	// to 150 ms.
	Timeouts150ms = "150ms"
)

// Bounds of Config.
const (
	MinPeers  = 3 // a crashed leader leaves a majority only from 3 peers
	MaxPeers  = 101
	MaxRounds = 10000
)

// DefaultWait bounds each wait when Config.Wait is zero.
const DefaultWait = 30 * time.Second

// stopGrace is how long a peer may take to exit after SIGTERM before it is
// killed.
const stopGrace = 5 * time.Second

// events bounds the peer lines waiting for the measuring goroutine.
const events = 64

// clockSlack is how far a peer's timestamp may lie outside the span in
// which its line can have been written.
const clockSlack = time.Minute

// Errors.
var (
	ErrConfig    = errors.New("raftbench: bad config")
	ErrNoAgree   = errors.New("raftbench: peers do not agree")
	ErrPeerExit  = errors.New("raftbench: peer exited")
	ErrPeerLine  = errors.New("raftbench: bad line from peer")
	errStaleTime = errors.New("timestamp out of range")
)

// Config is one measurement.
type Config struct {
	// Binary is the path of the raftpeer binary.
	Binary string
	// N is the number of peers, MinPeers to MaxPeers.
	N int
	// Timeouts is TimeoutsDefault or Timeouts150ms.
	Timeouts string
	// Rounds is the number of leader crashes, 1 to MaxRounds.
	Rounds int
	// Wait bounds the start-up agreement, each failover and each rejoin;
	// DefaultWait if zero.
	Wait time.Duration
	// Dir holds each peer's data directory (raft.log, stderr.log), kept
	// after return; if empty, a temporary directory removed on return.
	Dir string
	// Log receives a line per round; nil discards them.
	Log io.Writer
}

// Round is one leader crash.
type Round struct {
	// Killed is the ID of the leader that was killed.
	Killed string
	// Elected is the ID every survivor named afterwards.
	Elected string
	// Failover is the time from just before the kill until the last
	// survivor named Elected.
	Failover time.Duration
}

// Result is a measurement: its rounds and the nearest-rank quantiles of
// their failover times.
type Result struct {
	N        int
	Timeouts string
	Rounds   []Round
	P50      time.Duration
	P90      time.Duration
	P99      time.Duration
	Max      time.Duration
}

// Failovers lists the failover time of every round, in order.
func (r Result) Failovers() []time.Duration {
	ds := make([]time.Duration, len(r.Rounds))
	for i, rd := range r.Rounds {
		ds[i] = rd.Failover
	}
	return ds
}

func (c *Config) validate() error {
	if c.Binary == "" {
		return fmt.Errorf("%w: Binary is empty", ErrConfig)
	}
	if c.N < MinPeers || c.N > MaxPeers {
		return fmt.Errorf("%w: N %d: want %d to %d", ErrConfig, c.N, MinPeers, MaxPeers)
	}
	if c.Timeouts != TimeoutsDefault && c.Timeouts != Timeouts150ms {
		return fmt.Errorf("%w: Timeouts %q: want %q or %q", ErrConfig, c.Timeouts, TimeoutsDefault, Timeouts150ms)
	}
	if c.Rounds < 1 || c.Rounds > MaxRounds {
		return fmt.Errorf("%w: Rounds %d: want 1 to %d", ErrConfig, c.Rounds, MaxRounds)
	}
	if c.Wait < 0 {
		return fmt.Errorf("%w: Wait %s is negative", ErrConfig, c.Wait)
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// launch starts a cluster of cfg.N raftpeer processes, in cfg.Dir or a
// temporary directory, and waits until they agree on a leader, which it
// returns. stop ends the peers and removes the temporary directory; it is
// to be called whatever the error.
func launch(ctx context.Context, cfg Config) (c *cluster, leader string, stop func(), err error) {
	if _, err := os.Stat(cfg.Binary); err != nil {
		return nil, "", func() {}, fmt.Errorf("%w: Binary: %w", ErrConfig, err)
	}
	dir, temporary := cfg.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "raftbench-"); err != nil {
			return nil, "", func() {}, err
		}
		temporary = true
	}
	stop = func() {
		if c != nil {
			c.stop()
		}
		if temporary {
			os.RemoveAll(dir)
		}
	}
	addrs, err := freeport.Addrs(cfg.N)
	if err != nil {
		return nil, "", stop, err
	}
	c = newCluster(cfg, dir, addrs)
	for i := range c.peers {
		if err := c.start(i); err != nil {
			return c, "", stop, err
		}
	}
	leader, _, err = c.waitAgreed(ctx, "start-up", -1)
	return c, leader, stop, err
}

// MeasureCrash runs cfg.Rounds leader crashes on a fresh cluster of cfg.N
// raftpeer processes. See the package documentation for what is measured.
func MeasureCrash(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	res = Result{N: cfg.N, Timeouts: cfg.Timeouts}
	c, _, stop, err := launch(ctx, cfg)
	defer stop()
	if err != nil {
		return res, err
	}
	for round := 1; round <= cfg.Rounds; round++ {
		leader, _, _ := c.agreement(-1)
		killed := c.index(leader)
		killAt := time.Now()
		if err := c.kill(killed); err != nil {
			return res, err
		}
		elected, at, err := c.waitAgreed(ctx, fmt.Sprintf("round %d: failover after killing %s", round, leader), killed)
		if err != nil {
			return res, err
		}
		failover := at.Sub(killAt)
		if failover < 0 {
			return res, fmt.Errorf("%w: round %d: %s named %s %s before the kill", ErrPeerLine, round, elected, elected, -failover)
		}
		res.Rounds = append(res.Rounds, Round{Killed: leader, Elected: elected, Failover: failover})
		fmt.Fprintf(cfg.Log, "raft %s %d: round %d: killed %s, %s leads after %.1f ms\n",
			cfg.Timeouts, cfg.N, round, leader, elected, float64(failover)/float64(time.Millisecond))

		if err := c.waitExit(ctx, killed); err != nil {
			return res, err
		}
		if err := c.start(killed); err != nil {
			return res, err
		}
		if _, _, err := c.waitAgreed(ctx, fmt.Sprintf("round %d: rejoin of %s", round, leader), -1); err != nil {
			return res, err
		}
	}
	ds := res.Failovers()
	res.P50, res.P90, res.P99 = quantile(ds, 0.5), quantile(ds, 0.9), quantile(ds, 0.99)
	res.Max = quantile(ds, 1)
	return res, nil
}

// quantile is the nearest-rank q-quantile of ds; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// cluster is the peers of one measurement. Only the goroutine that called
// MeasureCrash touches its fields; the reader goroutines only send events.
type cluster struct {
	cfg    Config
	peers  []*peer
	spec   string // -peers
	events chan event
	quit   chan struct{} // closed by stop: readers stop sending
	wg     sync.WaitGroup
}

// peer is one member; proc is its current process, nil before the first
// start.
type peer struct {
	id, addr, data string
	proc           *process
	ready          bool
	leader         string    // "" until its first leader line; "-" for none
	at             time.Time // of the leader line
}

// process is one run of a peer.
type process struct {
	peer    int
	cmd     *exec.Cmd
	started time.Time
	killed  bool          // by kill: its exit is expected
	exited  bool          // its exit event arrived
	done    chan struct{} // closed when Wait returned
}

type eventKind int

const (
	evReady eventKind = iota
	evLeader
	evExit
	evBadLine
)

// event is what a reader goroutine saw on a process's stdout.
type event struct {
	proc   *process
	kind   eventKind
	leader string
	at     time.Time
	err    error // evExit: Wait's error; evBadLine: why
	line   string
}

func newCluster(cfg Config, dir string, addrs []string) *cluster {
	c := &cluster{cfg: cfg, events: make(chan event, events), quit: make(chan struct{})}
	spec := make([]string, len(addrs))
	for i, a := range addrs {
		id := fmt.Sprintf("p%d", i+1)
		c.peers = append(c.peers, &peer{id: id, addr: a, data: filepath.Join(dir, id)})
		spec[i] = id + "=" + a
	}
	c.spec = strings.Join(spec, ",")
	return c
}

func (c *cluster) index(id string) int {
	for i, p := range c.peers {
		if p.id == id {
			return i
		}
	}
	return -1
}

// start starts peer i's process and its reader.
func (c *cluster) start(i int) error {
	p := c.peers[i]
	if err := os.MkdirAll(p.data, 0o755); err != nil {
		return err
	}
	stderr, err := os.OpenFile(filepath.Join(p.data, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stderr.Close() // the child holds its own descriptor
	cmd := exec.Command(c.cfg.Binary, "-id", p.id, "-bind", p.addr, "-peers", c.spec, "-data", p.data, "-timeouts", c.cfg.Timeouts)
	cmd.Stderr = stderr
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	proc := &process{peer: i, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("raftbench: start %s: %w", p.id, err)
	}
	p.proc, p.ready, p.leader, p.at = proc, false, "", time.Time{}
	c.wg.Add(1)
	go c.read(proc, out)
	return nil
}

// read forwards proc's lines as events until its stdout closes, then waits
// for it and reports its exit. After stop it drains without sending.
func (c *cluster) read(proc *process, out io.Reader) {
	defer c.wg.Done()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		c.send(parseLine(proc, sc.Text()))
	}
	if err := sc.Err(); err != nil {
		c.send(event{proc: proc, kind: evBadLine, err: err})
		io.Copy(io.Discard, out)
	}
	err := proc.cmd.Wait()
	close(proc.done)
	c.send(event{proc: proc, kind: evExit, err: err})
}

func (c *cluster) send(ev event) {
	select {
	case c.events <- ev:
	case <-c.quit:
	}
}

// parseLine reads "ready <nanos>" or "leader <id> <nanos>".
func parseLine(proc *process, line string) event {
	bad := func(err error) event { return event{proc: proc, kind: evBadLine, err: err, line: line} }
	f := strings.Fields(line)
	var ev event
	switch {
	case len(f) == 2 && f[0] == "ready":
		ev = event{proc: proc, kind: evReady}
	case len(f) == 3 && f[0] == "leader":
		ev = event{proc: proc, kind: evLeader, leader: f[1]}
	default:
		return bad(errors.New("unknown line"))
	}
	nanos, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		return bad(err)
	}
	at := time.Unix(0, nanos)
	if at.Before(proc.started.Add(-clockSlack)) || at.After(time.Now().Add(clockSlack)) {
		return bad(errStaleTime)
	}
	ev.at, ev.line = at, line
	return ev
}

// handle applies one event to the cluster's view.
func (c *cluster) handle(ev event) error {
	p := c.peers[ev.proc.peer]
	switch ev.kind {
	case evExit:
		ev.proc.exited = true
		if !ev.proc.killed {
			return fmt.Errorf("%w: %s: %v%s", ErrPeerExit, p.id, ev.err, stderrTail(p.data))
		}
	case evBadLine:
		return fmt.Errorf("%w: %s: %q: %w", ErrPeerLine, p.id, ev.line, ev.err)
	}
	if ev.proc != p.proc || ev.proc.killed {
		return nil // a line from a killed process
	}
	switch ev.kind {
	case evReady:
		p.ready = true
	case evLeader:
		p.leader, p.at = ev.leader, ev.at
	}
	return nil
}

// stderrTail is the end of a peer's stderr.log, for an error message.
func stderrTail(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "stderr.log"))
	if err != nil || len(data) == 0 {
		return ""
	}
	const most = 512
	if len(data) > most {
		data = data[len(data)-most:]
	}
	return "; stderr: " + strings.TrimSpace(string(data))
}

// agreement reports the leader every live peer but skip (-1 for none)
// names, and the latest instant one of them named it, if they all name the
// same live peer other than skip.
func (c *cluster) agreement(skip int) (string, time.Time, bool) {
	var leader string
	var at time.Time
	for i, p := range c.peers {
		if i == skip {
			continue
		}
		if !p.ready || p.leader == "" || p.leader == "-" {
			return "", time.Time{}, false
		}
		if leader != "" && p.leader != leader {
			return "", time.Time{}, false
		}
		leader = p.leader
		if p.at.After(at) {
			at = p.at
		}
	}
	if l := c.index(leader); l < 0 || l == skip {
		return "", time.Time{}, false
	}
	return leader, at, true
}

// describe says what each live peer but skip names, for an error.
func (c *cluster) describe(skip int) string {
	var parts []string
	for i, p := range c.peers {
		if i == skip {
			continue
		}
		switch {
		case !p.ready:
			parts = append(parts, p.id+" not ready")
		case p.leader == "" || p.leader == "-":
			parts = append(parts, p.id+" names none")
		default:
			parts = append(parts, p.id+" names "+p.leader)
		}
	}
	return strings.Join(parts, ", ")
}

// next waits for one event, bounded by ctx and the timer.
func (c *cluster) next(ctx context.Context, timer <-chan time.Time) (event, bool, error) {
	select {
	case ev := <-c.events:
		return ev, true, nil
	case <-timer:
		return event{}, false, nil
	case <-ctx.Done():
		return event{}, false, ctx.Err()
	}
}

// waitAgreed handles events until every peer but skip names the same live
// leader other than skip, for at most cfg.Wait.
func (c *cluster) waitAgreed(ctx context.Context, what string, skip int) (string, time.Time, error) {
	timer := time.NewTimer(c.cfg.Wait)
	defer timer.Stop()
	for {
		if leader, at, ok := c.agreement(skip); ok {
			return leader, at, nil
		}
		ev, ok, err := c.next(ctx, timer.C)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("raftbench: %s: %w", what, err)
		}
		if !ok {
			return "", time.Time{}, fmt.Errorf("%w: %s: after %s: %s", ErrNoAgree, what, c.cfg.Wait, c.describe(skip))
		}
		if err := c.handle(ev); err != nil {
			return "", time.Time{}, fmt.Errorf("%w (during %s)", err, what)
		}
	}
}

// kill SIGKILLs peer i's process.
func (c *cluster) kill(i int) error {
	proc := c.peers[i].proc
	proc.killed = true
	if err := proc.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("raftbench: kill %s: %w", c.peers[i].id, err)
	}
	return nil
}

// waitExit handles events until the killed process of peer i has exited,
// so that its address is free again.
func (c *cluster) waitExit(ctx context.Context, i int) error {
	proc := c.peers[i].proc
	timer := time.NewTimer(c.cfg.Wait)
	defer timer.Stop()
	for !proc.exited {
		ev, ok, err := c.next(ctx, timer.C)
		if err != nil {
			return fmt.Errorf("raftbench: exit of %s: %w", c.peers[i].id, err)
		}
		if !ok {
			return fmt.Errorf("raftbench: %s still running %s after SIGKILL", c.peers[i].id, c.cfg.Wait)
		}
		if err := c.handle(ev); err != nil {
			return fmt.Errorf("%w (waiting for %s to exit)", err, c.peers[i].id)
		}
	}
	return nil
}

// stop ends every process: SIGTERM, then SIGKILL after stopGrace; and
// waits for every reader.
func (c *cluster) stop() {
	close(c.quit)
	var procs []*process
	for _, p := range c.peers {
		if p.proc != nil {
			procs = append(procs, p.proc)
			p.proc.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	for _, proc := range procs {
		select {
		case <-proc.done:
		case <-grace.C: // once: later processes wait for their exit
			for _, q := range procs {
				q.cmd.Process.Kill()
			}
			<-proc.done
		}
	}
	c.wg.Wait()
}
