// Command raftpeer runs one hashicorp/raft peer, so that the benchmark can
// measure raft's crash failover with real processes on loopback beside
// baton's own clusters.
//
// It is a timing harness, not a replicated service: its log and stable
// stores are raft.NewInmemStore, so a restarted peer comes back empty (a
// new member with the same ID and address), which is unsafe in production
// and fine for measuring how fast the survivors elect a new leader. Its FSM
// ignores every entry. Every peer bootstraps the same configuration (raft
// accepts identical bootstraps), so the cluster needs no join step.
//
// Standard output carries one line per change of the peer's view, for the
// benchmark to parse:
//
//	ready <unix_nanos>          raft is running
//	leader <id> <unix_nanos>    the peer now names <id> leader ("-" for none)
//
// The leader lines come from raft's Observer API (LeaderObservation) on a
// bounded channel; if raft had to drop an observation because the channel
// was full, the peer prints raft's current leader once more so the last
// line stays right. The library's own log goes to <data>/raft.log. SIGTERM
// or SIGINT shut raft down and the peer exits 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// observations bounds the leader observations waiting to be printed.
const observations = 64

// Timing variants of -timeouts.
const (
	timingDefault = "default"
	timing150ms   = "150ms"
)

type options struct {
	id       string
	bind     string
	peers    []raft.Server
	data     string
	timeouts string
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "raftpeer:", err)
		os.Exit(2)
	}
	if err := run(opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "raftpeer:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	fs := flag.NewFlagSet("raftpeer", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o options
	var peers string
	fs.StringVar(&o.id, "id", "", "this peer's server ID (required; one of -peers)")
	fs.StringVar(&o.bind, "bind", "", "TCP address to listen on, e.g. 127.0.0.1:7001 (required; must match this peer's entry in -peers)")
	fs.StringVar(&peers, "peers", "", "every peer, this one included, as comma-separated ID=host:port (required)")
	fs.StringVar(&o.data, "data", "", "directory for raft's own log, raft.log (required; created if missing)")
	fs.StringVar(&o.timeouts, "timeouts", timingDefault, "raft timing: default (raft.DefaultConfig) or 150ms (heartbeat, election and leader lease timeouts of 150 ms)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.id == "" {
		return o, errors.New("-id is required")
	}
	if o.bind == "" {
		return o, errors.New("-bind is required")
	}
	if o.data == "" {
		return o, errors.New("-data is required")
	}
	if o.timeouts != timingDefault && o.timeouts != timing150ms {
		return o, fmt.Errorf("-timeouts %q: want %s or %s", o.timeouts, timingDefault, timing150ms)
	}
	var err error
	if o.peers, err = parsePeers(peers); err != nil {
		return o, fmt.Errorf("-peers: %w", err)
	}
	self := false
	for _, p := range o.peers {
		if string(p.ID) == o.id {
			if string(p.Address) != o.bind {
				return o, fmt.Errorf("-bind %s differs from %s's address %s in -peers", o.bind, o.id, p.Address)
			}
			self = true
		}
	}
	if !self {
		return o, fmt.Errorf("-id %q is not in -peers", o.id)
	}
	return o, nil
}

// parsePeers parses "a=127.0.0.1:7001,b=127.0.0.1:7002".
func parsePeers(s string) ([]raft.Server, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	var servers []raft.Server
	ids := map[string]bool{}
	addrs := map[string]bool{}
	for entry := range strings.SplitSeq(s, ",") {
		id, addr, ok := strings.Cut(entry, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("entry %q: want ID=host:port", entry)
		}
		if strings.ContainsAny(id, " \t\r\n") {
			return nil, fmt.Errorf("entry %q: the ID holds white space", entry)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		if ids[id] {
			return nil, fmt.Errorf("ID %q appears twice", id)
		}
		if addrs[addr] {
			return nil, fmt.Errorf("address %s appears twice", addr)
		}
		ids[id], addrs[addr] = true, true
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	return servers, nil
}

// config is raft's configuration for the chosen timing.
func config(o options, logOut io.Writer) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(o.id)
	c.LogOutput = logOut
	c.LogLevel = "INFO"
	if o.timeouts == timing150ms {
		c.HeartbeatTimeout = 150 * time.Millisecond
		c.ElectionTimeout = 150 * time.Millisecond
		c.LeaderLeaseTimeout = 150 * time.Millisecond
		c.CommitTimeout = 5 * time.Millisecond
	}
	return c
}

func run(o options, out io.Writer) error {
	if err := os.MkdirAll(o.data, 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(o.data, "raft.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	conf := config(o, logFile)
	if err := raft.ValidateConfig(conf); err != nil {
		return err
	}

	// Signals are caught before raft starts, so that a SIGTERM at any
	// moment after this shuts down cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	trans, err := raft.NewTCPTransport(o.bind, nil, 3, 2*time.Second, logFile)
	if err != nil {
		return fmt.Errorf("transport on %s: %w", o.bind, err)
	}
	defer trans.Close()
	store := raft.NewInmemStore() // logs and stable state: gone on restart
	snaps := raft.NewInmemSnapshotStore()
	configuration := raft.Configuration{Servers: o.peers}
	if err := raft.BootstrapCluster(conf, store, store, snaps, trans, configuration); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}

	// Raft runs from NewRaft on, and an observer can only be registered on
	// the instance NewRaft returns: register it at once, then print the
	// leader raft already knows, in case an election ended in between.
	obsCh := make(chan raft.Observation, observations)
	observer := raft.NewObserver(obsCh, false, func(ob *raft.Observation) bool {
		_, ok := ob.Data.(raft.LeaderObservation)
		return ok
	})
	r, err := raft.NewRaft(conf, discardFSM{}, store, store, snaps, trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	r.RegisterObserver(observer)
	defer r.DeregisterObserver(observer)

	p := &printer{out: out}
	p.ready()
	_, id := r.LeaderWithID()
	p.leader(string(id))

	var dropped uint64
	for {
		select {
		case ob := <-obsCh:
			lo := ob.Data.(raft.LeaderObservation) // the filter passes no other type
			p.leader(string(lo.LeaderID))
			if d := observer.GetNumDropped(); d != dropped {
				// Some change was lost: print the leader raft holds now.
				dropped = d
				_, id := r.LeaderWithID()
				p.leader(string(id))
			}
			if p.err != nil {
				r.Shutdown().Error()
				return fmt.Errorf("write stdout: %w", p.err)
			}
		case <-sigs:
			return r.Shutdown().Error()
		}
	}
}

// printer writes the peer's lines to stdout, each leader line only when the
// named leader changes.
type printer struct {
	out     io.Writer
	last    string
	printed bool
	err     error
}

func (p *printer) ready() {
	p.write(fmt.Sprintf("ready %d\n", time.Now().UnixNano()))
}

func (p *printer) leader(id string) {
	if id == "" {
		id = "-"
	}
	if p.printed && id == p.last {
		return
	}
	p.last, p.printed = id, true
	p.write(fmt.Sprintf("leader %s %d\n", id, time.Now().UnixNano()))
}

func (p *printer) write(line string) {
	if p.err != nil {
		return
	}
	_, p.err = io.WriteString(p.out, line)
}

// discardFSM applies nothing: the benchmark replicates no data.
type discardFSM struct{}

func (discardFSM) Apply(*raft.Log) any { return nil }

func (discardFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }

func (discardFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

type emptySnapshot struct{}

func (emptySnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }

func (emptySnapshot) Release() {}
