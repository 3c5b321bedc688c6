// Command soak runs a deployment of many elections over several node
// processes and a three-server NATS cluster for a set time, under random
// faults one at a time (a process killed, paused, stopped and started
// again, a member joining or leaving for good, a NATS server restarted),
// and checks from outside, per election, what the contract promises:
// no two leaders announce one term, each leader's terms increase, a
// process's term never goes back, never two Paxos leases at once, and
// every election led again after each fault within a bound. It prints a
// summary and exits 1 on a violation (2 on bad flags or a deployment that
// cannot start). docs/soak.md describes it; go tool task soak runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

// Exit statuses.
const (
	exitOK        = 0
	exitViolation = 1
	exitUsage     = 2
)

// options are the command line's.
type options struct {
	duration  time.Duration
	elections int
	processes int
	algorithm protocol.Algorithm
	seed      uint64
	nodeBin   string
	natsBin   string
	out       string
	heal      time.Duration
	start     time.Duration
	poll      time.Duration
	gapMin    time.Duration
	gapMax    time.Duration
	slack     time.Duration
	logLevel  string
	env       envFlag
}

// envFlag is -env, repeated: variables added to every node's
// environment.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(kv string) error {
	name, _, ok := strings.Cut(kv, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME=value", kv)
	}
	if slices.Contains(soakVars, name) {
		return fmt.Errorf("%s is set by the soak", name)
	}
	*e = append(*e, kv)
	return nil
}

// soakVars are the node variables the soak sets itself.
var soakVars = []string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NODE_ID", "NODE_PEERS", "HTTP_ADDR", "ELECTION_DATA",
	"ELECTION_ALGORITHM", "ELECTION_CLUSTER", "ELECTION_CLUSTERS", "ELECTION_MEMBERSHIP", "ELECTION_VOTERS", "LOG_LEVEL"}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	alg := fs.String("algorithm", string(protocol.Bully), "the elections' algorithm: bully, ring or paxos (1,000 Paxos elections exceed a 2-core machine: docs/soak.md)")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long faults are made (the last one then heals)")
	fs.IntVar(&o.elections, "elections", 1000, "elections each process takes part in (ELECTION_CLUSTERS=soak-{0..n-1})")
	fs.IntVar(&o.processes, "processes", 5, "node processes at the start (IDs 1..n); members that join get the next IDs")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the random faults (0: a new one, printed)")
	fs.StringVar(&o.nodeBin, "node", "bin/node", "the node binary (go tool task build)")
	fs.StringVar(&o.natsBin, "nats", "bin/nats-server", "the NATS server binary, cmd/natsd (go tool task build)")
	fs.StringVar(&o.out, "out", "", "directory of the logs, data and announcements (created; empty: a new one under the system's temporary directory)")
	fs.DurationVar(&o.heal, "heal", 30*time.Second, "how long every election may take to be led again after a fault")
	fs.DurationVar(&o.start, "start", 2*time.Minute, "how long every election may take to be led after the deployment starts")
	fs.DurationVar(&o.poll, "poll", 300*time.Millisecond, "how often each live process's /elections is read")
	fs.DurationVar(&o.gapMin, "gap-min", 2*time.Second, "shortest time between a fault's healing and the next fault")
	fs.DurationVar(&o.gapMax, "gap-max", 6*time.Second, "longest time between a fault's healing and the next fault")
	fs.DurationVar(&o.slack, "lease-slack", 10*time.Millisecond, "taken off each reported Paxos lease before comparing leases")
	fs.StringVar(&o.logLevel, "log-level", "info", "the nodes' LOG_LEVEL")
	fs.Var(&o.env, "env", "NAME=value added to every node's environment, such as ELECTION_LEASE=1s (repeat it for several)")
	if err := fs.Parse(args); err != nil {
		return o, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	o.algorithm = protocol.Algorithm(*alg)
	switch {
	case !slices.Contains([]protocol.Algorithm{protocol.Paxos, protocol.Bully, protocol.Ring}, o.algorithm):
		return o, usageError{fmt.Sprintf("-algorithm %q: one of paxos, bully, ring (byzantine needs member keys, which the soak does not make)", *alg)}
	case o.duration < 0:
		return o, usageError{"-duration must not be negative"}
	case o.elections < 1 || o.elections > 16384:
		return o, usageError{fmt.Sprintf("-elections %d: from 1 to 16384", o.elections)}
	case o.processes < 3 || o.processes > 50:
		return o, usageError{fmt.Sprintf("-processes %d: from 3 (Paxos's three voters) to 50", o.processes)}
	case o.heal <= 0 || o.start <= 0:
		return o, usageError{"-heal and -start must be positive"}
	case o.poll < 10*time.Millisecond:
		return o, usageError{"-poll must be at least 10ms"}
	case o.gapMin < 0 || o.gapMax < o.gapMin:
		return o, usageError{"-gap-min must not be negative nor above -gap-max"}
	case o.slack < 0:
		return o, usageError{"-lease-slack must not be negative"}
	}
	for _, b := range []struct{ flag, path string }{{"-node", o.nodeBin}, {"-nats", o.natsBin}} {
		if info, err := os.Stat(b.path); err != nil || info.IsDir() {
			return o, usageError{fmt.Sprintf("%s %s: not a file (build the binaries with go tool task build)", b.flag, b.path)}
		}
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "soak:", err)
		}
		return exitUsage
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	if o.out == "" {
		if o.out, err = os.MkdirTemp("", "baton-soak-"); err != nil {
			fmt.Fprintln(stderr, "soak:", err)
			return exitUsage
		}
	} else if err := emptyDir(o.out); err != nil {
		fmt.Fprintln(stderr, "soak: -out:", err)
		return exitUsage
	}
	// Stopped by Ctrl-C, or by the task runner's death: the soak stops
	// making faults, prints its summary and stops the deployment.
	_ = localcluster.DieWithParent(syscall.SIGTERM)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	s := newSoak(o, stdout)
	s.ctx = ctx
	led, err := s.deploy()
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		s.teardown()
		return exitUsage
	}
	if led {
		s.runFaults(ctx)
	} else {
		s.logf("not every election was led within -start %v: no faults; the summary follows", o.start)
	}
	s.measureEnd(ctx)
	s.teardown()
	return s.summary()
}

// emptyDir creates dir, or checks that it is empty.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

// soak is one run.
type soak struct {
	o     options
	out   io.Writer
	rng   *rand.Rand
	names []string
	begin time.Time

	nats    []*natsServer
	common  []string // every node's environment but its own variables
	sub     *subscriber
	mu      sync.Mutex // guards check, members, heals, faults
	check   *Checker
	members []*member
	nextID  uint64
	heals   map[string][]time.Duration // per step
	faults  map[string]int             // per kind
	stepSeq []string                   // the steps in the order of the summary
	polls   int
	failed  int // failed polls

	ctx     context.Context // ends on SIGINT or SIGTERM
	pollers sync.WaitGroup
	stopAll context.CancelFunc
	pollCtx context.Context
	usage   []usage
}

func newSoak(o options, out io.Writer) *soak {
	names := clusterNames(o.elections)
	ctx, cancel := context.WithCancel(context.Background())
	return &soak{
		o: o, out: out, names: names,
		rng:     rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15)),
		check:   NewChecker(o.algorithm, names, o.slack),
		heals:   map[string][]time.Duration{},
		faults:  map[string]int{},
		pollCtx: ctx, stopAll: cancel,
	}
}

// logf prints a progress line, stamped with the time since the start.
func (s *soak) logf(format string, args ...any) {
	el := time.Duration(0)
	if !s.begin.IsZero() {
		el = time.Since(s.begin).Round(100 * time.Millisecond)
	}
	fmt.Fprintf(s.out, "%s [+%v] %s\n", time.Now().UTC().Format("15:04:05"), el, fmt.Sprintf(format, args...))
}

// deploy starts the NATS cluster, the subscriber and the node processes,
// and waits until every election is led: led tells whether they were
// within -start (if not, a violation is recorded). err is a deployment
// that could not start.
func (s *soak) deploy() (led bool, err error) {
	s.logf("soak: seed %d, %d elections (%s), %d processes, %v of faults, heal bound %v; logs and data in %s",
		s.o.seed, s.o.elections, s.o.algorithm, s.o.processes, s.o.duration, s.o.heal, s.o.out)
	if len(s.o.env) > 0 {
		s.logf("the nodes' environment adds %s", s.o.env.String())
	}
	if s.nats, err = newNATSCluster(s.o.natsBin, s.o.out, 3); err != nil {
		return false, err
	}
	for _, n := range s.nats {
		if err := n.start(); err != nil {
			return false, err
		}
	}
	urls := make([]string, len(s.nats))
	for i, n := range s.nats {
		urls[i] = n.URL()
	}
	if s.sub, err = subscribe(urls, filepath.Join(s.o.out, "announcements.jsonl"), s.announced); err != nil {
		return false, err
	}
	common := []string{
		"NATS_URL=" + strings.Join(urls, ","),
		"ELECTION_ALGORITHM=" + string(s.o.algorithm),
		"ELECTION_CLUSTERS=" + clustersVar(s.o.elections),
		"ELECTION_MEMBERSHIP=dynamic",
		"LOG_LEVEL=" + s.o.logLevel,
	}
	common = append(common, s.o.env...)
	if s.o.algorithm == protocol.Paxos {
		common = append(common, "ELECTION_VOTERS="+idList(voters))
	}
	s.common = common
	s.begin = time.Now()
	for range s.o.processes {
		m, err := s.addMember()
		if err != nil {
			return false, err
		}
		p, _ := m.current()
		s.logf("node %d: pid %d, HTTP %s, log %s", m.id, p.pid(), m.httpAddr, m.logPath)
	}
	s.logf("deployment: NATS %s; nodes %d..%d started", strings.Join(urls, " "), 1, s.o.processes)
	took, ok := s.waitLed("start", s.begin, s.o.start)
	if !ok {
		return false, nil
	}
	s.logf("every election led %v after the start", took.Round(time.Millisecond))
	s.record("start", took)
	return true, nil
}

// voters are Paxos's voters (ELECTION_VOTERS): the first three IDs,
// which never leave for good.
var voters = []uint64{1, 2, 3}

// addMember prepares, starts and polls the next ID.
func (s *soak) addMember() (*member, error) {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	m, err := newMember(s.o.nodeBin, s.o.out, id, s.common)
	if err != nil {
		return nil, err
	}
	if err := m.start(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.members = append(s.members, m)
	s.mu.Unlock()
	s.watchExit(m)
	s.pollers.Add(1)
	go s.poll(m)
	return m, nil
}

// watchExit reports the exit of m's current run that the soak did not
// cause as a violation.
func (s *soak) watchExit(m *member) {
	p, _ := m.current()
	go func() {
		<-p.done
		if p.wasExpected() {
			return
		}
		s.mu.Lock()
		s.check.Add(Violation{At: time.Now(), Rule: RuleProcess, Text: fmt.Sprintf("node %d (pid %d) exited on its own: %s; see %s", m.id, p.pid(), localcluster.ExitText(p.err), m.logPath)})
		s.mu.Unlock()
		s.logf("VIOLATION: node %d exited on its own: %s", m.id, localcluster.ExitText(p.err))
	}()
}

// poll reads m's /elections every -poll while it is live, until the end.
func (s *soak) poll(m *member) {
	defer s.pollers.Done()
	client := newPollClient()
	defer client.CloseIdleConnections()
	for s.pollCtx.Err() == nil {
		m.mu.Lock()
		gone := m.gone
		m.mu.Unlock()
		if gone {
			return
		}
		next := time.Now().Add(s.o.poll)
		if m.live() {
			_, run := m.current()
			sent := time.Now()
			sts, err := fetchElections(s.pollCtx, client, m.httpAddr)
			recv := time.Now()
			s.mu.Lock()
			s.polls++
			if err != nil {
				s.failed++
			} else if _, now := m.current(); now == run {
				s.check.Poll(Poll{ID: m.id, Run: run, Sent: sent, Recv: recv, Statuses: sts})
			}
			s.mu.Unlock()
		}
		select {
		case <-s.pollCtx.Done():
		case <-time.After(time.Until(next)):
		}
	}
}

// announced records an announcement heard at recv.
func (s *soak) announced(a protocol.Announcement, recv time.Time) {
	s.mu.Lock()
	s.check.Announce(a, recv)
	s.mu.Unlock()
}

// liveIDs are the members that run and are not paused.
func (s *soak) liveIDs() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []uint64
	for _, m := range s.members {
		if m.live() {
			ids = append(ids, m.id)
		}
	}
	return ids
}

// waitLed waits until every election is led again, as polls sent after
// since show it, for at most bound; it records a violation if not. It
// gives up, without a violation, when the soak is interrupted.
func (s *soak) waitLed(step string, since time.Time, bound time.Duration) (time.Duration, bool) {
	deadline := since.Add(bound)
	report := time.Now().Add(waitReport)
	for {
		live := s.liveIDs()
		s.mu.Lock()
		unled := s.check.Unled(live, since)
		s.mu.Unlock()
		now := time.Now()
		if len(unled) == 0 {
			return now.Sub(since), true
		}
		if s.ctx.Err() != nil {
			s.logf("%s: interrupted with %d of %d elections not led", step, len(unled), len(s.names))
			return now.Sub(since), false
		}
		if now.After(report) && now.Before(deadline) {
			report = now.Add(waitReport)
			s.logf("%s: %d of %d elections not led yet, e.g. %s: %s", step, len(unled), len(s.names), unled[0].Cluster, unled[0].Why)
		}
		if now.After(deadline) || (len(live) == 0 && !s.anyRunning()) {
			s.mu.Lock()
			s.check.HealFailed(now, step, bound, unled)
			v := s.check.Violations()
			s.mu.Unlock()
			s.logf("VIOLATION: %s", v[len(v)-1])
			return now.Sub(since), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// anyRunning reports whether any node process runs, paused or not.
func (s *soak) anyRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.members {
		if m.running() {
			return true
		}
	}
	return false
}

// waitReport is how often waitLed says how many elections are not led.
const waitReport = 10 * time.Second

// record adds a heal time of step.
func (s *soak) record(step string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.heals[step]; !ok {
		s.stepSeq = append(s.stepSeq, step)
	}
	s.heals[step] = append(s.heals[step], took)
}

// teardown stops the nodes, the subscriber and the NATS servers.
func (s *soak) teardown() {
	s.stopAll()
	s.pollers.Wait()
	s.mu.Lock()
	members := slices.Clone(s.members)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range members {
		if p, _ := m.current(); p != nil {
			wg.Go(func() { p.stop(stopGrace) })
		}
	}
	wg.Wait()
	if s.sub != nil {
		s.sub.close()
	}
	for _, n := range s.nats {
		if n.proc != nil {
			n.proc.stop(stopGrace)
		}
	}
}
