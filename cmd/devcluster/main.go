// Command devcluster runs an election cluster on this machine with one
// command: an embedded NATS server configured as a deployment (accounts,
// users, connection events, JetStream), N node processes of the built node
// binary, each with its own HTTP port, and the observer with its page. With
// -algorithm all it runs one cluster per algorithm side by side. It prints
// one line per leader change as the announcements arrive on
// election.*.leader; the processes' output goes to one log file each.
//
// It shows each node's PID and /status URL when the node starts, and how
// it exited when it does. Nodes may die (kill <pid>): NATS and the observer
// keep running, the last node's death included, until devcluster is
// stopped. Its control endpoint on 127.0.0.1 (-control-port) starts a node
// again with the same ID and data directory, or stops one; the commands
// "devcluster restart <id>", "devcluster kill <id>" and "devcluster nodes"
// are its client (go tool task restart -- 3).
//
// Ctrl-C (SIGINT), SIGTERM or SIGHUP stops it: SIGTERM to every node,
// which hands leadership over and exits; then the observer and the NATS
// server. On Linux the same happens when the process that started it
// exits (go tool task run killed, or given SIGINT three times), and the
// nodes and the observer are killed if it dies without stopping them.
//
// The nodes inherit the environment, so timing variables such as
// ELECTION_HEARTBEAT_INTERVAL can be set when starting it.
//
// With -keys auto (the default) and a node binary that reads member keys,
// each cluster gets one key per node (in the log directory, keys/<cluster>)
// and each node connects to NATS as the user of its key, allowed only its
// own cluster's subjects; a binary built before member keys connects as
// the shared node user. With -membership dynamic each node gets a
// credential of its cluster's authority instead, and connects to NATS with
// it: the embedded server checks it (its credential check runs in
// devcluster's process, logging to nats/callout.log in the log directory)
// and confines the node to its cluster's subjects.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// stopGrace is how long a node may take to exit after SIGTERM before it is
// killed; the contract promises 2 s.
const stopGrace = 5 * time.Second

type config struct {
	nodes        int
	binary       string
	observer     string
	observerPort int
	natsPort     int
	httpPort     int
	controlPort  int
	algorithm    string
	cluster      string
	logDir       string
	keys         string
	membership   string

	algorithms []string // one cluster each
}

func main() {
	if len(os.Args) > 1 {
		if _, ok := commands[os.Args[1]]; ok {
			if err := runCommand(os.Args[1], os.Args[2:], os.Stdout, os.Stderr); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					os.Exit(0)
				}
				fmt.Fprintln(os.Stderr, "devcluster:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// The process that started this one (the task runner, a shell) may die
	// without passing a signal on: the task runner only reports the first
	// two SIGINTs it gets alone and exits at the third. Stop then as on
	// SIGTERM, so that no node outlives it.
	if err := localcluster.DieWithParent(syscall.SIGTERM); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
	}
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		stop()
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("devcluster", flag.ContinueOnError)
	fs.IntVar(&c.nodes, "nodes", 5, "number of nodes, with IDs 1..n")
	fs.StringVar(&c.binary, "binary", "bin/node", "path of the node binary")
	fs.StringVar(&c.observer, "observer", "bin/observer", `path of the observer binary ("" runs none)`)
	fs.IntVar(&c.observerPort, "observer-port", 8080, "HTTP port of the observer's page on 127.0.0.1")
	fs.IntVar(&c.natsPort, "nats-port", 4222, "port of the embedded NATS server on 127.0.0.1 (-1: a free port)")
	fs.IntVar(&c.httpPort, "http-port", 8081, "HTTP port of node 1; node i listens on http-port+i-1")
	fs.IntVar(&c.controlPort, "control-port", defaultControlPort, "port of the control endpoint on 127.0.0.1, for devcluster restart, kill and nodes (-1: a free port, 0: none)")
	fs.StringVar(&c.algorithm, "algorithm", string(protocol.Bully), `election algorithm (ELECTION_ALGORITHM), or "all": one cluster per algorithm, named after it`)
	fs.StringVar(&c.cluster, "cluster", "default", "cluster name (ELECTION_CLUSTER); ignored with -algorithm all")
	fs.StringVar(&c.logDir, "logs", "", "directory for the node logs (default: a new temporary directory)")
	fs.StringVar(&c.keys, "keys", "auto", `member keys: "on", "off", or "auto" (on if the node binary reads ELECTION_KEY_FILE)`)
	fs.StringVar(&c.membership, "membership", "static", `"static" (NODE_PEERS) or "dynamic": members that come and go, with a credential each instead of member keys; Paxos votes with nodes 1..3; byzantine starts from nodes 1..4, the others join`)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: devcluster [flags]: run a local cluster until Ctrl-C")
		for _, c := range slices.Sorted(maps.Keys(commands)) {
			fmt.Fprintf(fs.Output(), "       devcluster %s ...: %s\n", c, commands[c])
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.controlPort < -1 || c.controlPort > 65535 {
		return c, fmt.Errorf("-control-port %d is not a port (or -1 for a free one, 0 for none)", c.controlPort)
	}
	if c.natsPort != -1 && (c.natsPort < 1 || c.natsPort > 65535) {
		return c, fmt.Errorf("-nats-port %d is not a port (or -1 for a free one)", c.natsPort)
	}
	if c.nodes < 1 {
		return c, fmt.Errorf("-nodes must be at least 1, got %d", c.nodes)
	}
	if c.membership != "static" && c.membership != "dynamic" {
		return c, fmt.Errorf("-membership: %q is not static or dynamic", c.membership)
	}
	switch {
	case c.algorithm == "all":
		for _, a := range protocol.Algorithms {
			c.algorithms = append(c.algorithms, string(a))
		}
	case slices.Contains(protocol.Algorithms, protocol.Algorithm(c.algorithm)):
		c.algorithms = []string{c.algorithm}
	default:
		return c, fmt.Errorf("-algorithm: %q is not one of %v or all", c.algorithm, protocol.Algorithms)
	}
	// A byzantine cluster below 4 members tolerates no liar, and its nodes
	// refuse it unless they inherit the opt-in.
	if small, _ := strconv.ParseBool(os.Getenv("ELECTION_BYZANTINE_SMALL")); slices.Contains(c.algorithms, string(protocol.Byzantine)) && c.nodes < 4 && !small {
		return c, fmt.Errorf("-nodes %d: byzantine with fewer than 4 nodes tolerates no liar, and the nodes refuse it; use -nodes 4 or more, another -algorithm, or set ELECTION_BYZANTINE_SMALL=true to run it anyway", c.nodes)
	}
	if c.httpPort < 1 || c.httpPort+len(c.algorithms)*c.nodes-1 > 65535 {
		return c, fmt.Errorf("-http-port %d leaves no room for %d nodes", c.httpPort, len(c.algorithms)*c.nodes)
	}
	if c.observer != "" && (c.observerPort < 1 || c.observerPort > 65535) {
		return c, fmt.Errorf("-observer-port %d is not a port", c.observerPort)
	}
	if err := protocol.ValidateCluster(c.cluster); err != nil {
		return c, fmt.Errorf("-cluster: %w", err)
	}
	if !slices.Contains([]string{"on", "off", "auto"}, c.keys) {
		return c, fmt.Errorf("-keys: %q is not on, off or auto", c.keys)
	}
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	if cfg.logDir == "" {
		if cfg.logDir, err = os.MkdirTemp("", "baton-devcluster-"); err != nil {
			return err
		}
	}

	if cfg.observer != "" {
		if _, err := os.Stat(cfg.observer); err != nil {
			return fmt.Errorf("observer binary: %w (build it with go tool task build, or pass -observer \"\")", err)
		}
	}
	ids := make([]uint64, cfg.nodes)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	withKeys := cfg.keys == "on"
	if cfg.keys == "auto" {
		if withKeys, err = localcluster.KnowsMemberKeys(cfg.binary); err != nil {
			return err
		}
	}
	if !withKeys {
		for _, a := range cfg.algorithms {
			if protocol.Algorithm(a).NeedsKeys() {
				return fmt.Errorf("-algorithm %s needs member keys: pass -keys on (or auto, with a node binary that reads ELECTION_KEY_FILE)", a)
			}
		}
	}
	members := map[string]*signing.MemberKeys{}
	keyDirs := map[string]string{}     // each cluster's key directory, with keys
	authorities := map[string]string{} // each dynamic cluster's authority, with keys
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", cfg.natsPort)
	// A node's exit is read before the node is started again, so each has
	// at most one waiting.
	exits := make(chan localcluster.Exit, len(cfg.algorithms)*cfg.nodes)
	var nodes []*localcluster.Node
	cast := roster{nodes: map[string][]*localcluster.Node{}}
	type clusterInfo struct{ name, algorithm, first, last string }
	var clusters []clusterInfo
	port := cfg.httpPort
	for _, algorithm := range cfg.algorithms {
		name := cfg.cluster
		if len(cfg.algorithms) > 1 {
			name = algorithm
		}
		addrs := make([]string, cfg.nodes)
		for i := range addrs {
			addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
			port++
		}
		env, keyDir := localcluster.NodeEnv(), filepath.Join(cfg.logDir, "keys", name)
		dynamic := cfg.membership == "dynamic"
		var authority string
		if withKeys && dynamic {
			// The nodes connect with their credentials, which the
			// server checks (CredentialEnv), not as the node user.
			env = nil
		}
		if dynamic && algorithm == string(protocol.Paxos) {
			env = append(env, "ELECTION_VOTERS="+voters(ids))
		}
		switch {
		case withKeys && dynamic:
			if authority, err = localcluster.MakeCredentials(keyDir, name, ids); err != nil {
				return err
			}
			keyDirs[name] = keyDir
			authorities[name] = authority
			if algorithm == string(protocol.Byzantine) {
				// Nodes 1 to 4 are the configured members; the others
				// join with their credentials.
				path, err := localcluster.WriteConfiguredMembers(keyDir, name, ids[:min(len(ids), configuredByzantine)])
				if err != nil {
					return err
				}
				env = append(env, "ELECTION_KEYS_FILE="+path)
			}
		case withKeys:
			env = nil
			if members[name], err = localcluster.MakeMemberKeys(keyDir, name, protocol.Algorithm(algorithm), ids); err != nil {
				return err
			}
			keyDirs[name] = keyDir
		}
		ns, err := localcluster.NewNodes(localcluster.Spec{
			Binary:    cfg.binary,
			NATSURL:   natsURL,
			Cluster:   name,
			Algorithm: algorithm,
			IDs:       ids,
			Dynamic:   dynamic,
			HTTPAddrs: addrs,
			LogDir:    filepath.Join(cfg.logDir, name),
			Env:       env,
			Exits:     exits,
		})
		if err != nil {
			return err
		}
		switch {
		case withKeys && dynamic:
			for _, n := range ns {
				for _, kv := range localcluster.CredentialEnv(keyDir, n.ID, authority) {
					n.Setenv(kv)
				}
			}
		case withKeys:
			for _, n := range ns {
				for _, kv := range localcluster.MemberEnv(keyDir, n.ID) {
					n.Setenv(kv)
				}
			}
		}
		nodes = append(nodes, ns...)
		cast.clusters = append(cast.clusters, name)
		cast.nodes[name] = ns
		clusters = append(clusters, clusterInfo{name, algorithm, addrs[0], addrs[len(addrs)-1]})
	}

	natsDir := filepath.Join(cfg.logDir, "nats")
	if err := os.MkdirAll(natsDir, 0o755); err != nil {
		return err
	}
	ns, stopNATS, err := startNATS(natsDir, cfg.natsPort, members, authorities)
	if err != nil {
		return err
	}
	defer stopNATS()
	// The server's own address: the port it took if -nats-port is -1.
	natsURL = ns.ClientURL()
	for _, n := range nodes {
		n.Setenv("NATS_URL=" + natsURL)
	}

	nc, err := nats.Connect(natsURL, nats.Name("devcluster"), localcluster.AsApp())
	if err != nil {
		return fmt.Errorf("connect to nats: %w", err)
	}
	defer nc.Close()
	leaders := make(chan *nats.Msg, 256)
	if _, err := nc.ChanSubscribe(protocol.AllLeaders, leaders); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}

	var observer *localcluster.Process
	if cfg.observer != "" {
		addr := fmt.Sprintf("127.0.0.1:%d", cfg.observerPort)
		env := append(localcluster.ObserverEnv(), "NATS_URL="+natsURL, "HTTP_ADDR="+addr, "OBSERVER_DATA="+filepath.Join(cfg.logDir, "observer-data"))
		if len(keyDirs) > 0 {
			// The observer checks what the members sign, byzantine
			// certificates included.
			dir := filepath.Join(cfg.logDir, "keys", "observer")
			if err := localcluster.ObserverKeys(dir, keyDirs); err != nil {
				return err
			}
			env = append(env, "OBSERVER_KEYS_DIR="+dir)
		}
		observer, err = localcluster.StartProcess(cfg.observer, filepath.Join(cfg.logDir, "observer.log"), env)
		if err != nil {
			return err
		}
		defer observer.Stop(stopGrace)
		fmt.Fprintf(out, "devcluster: observer page at http://%s/ (pid %d, log %s)\n", addr, observer.Pid(), observer.LogPath)
	}

	requests := make(chan request)
	loopDone := make(chan struct{}) // closed when the main loop ends, or run returns before it
	endLoop := sync.OnceFunc(func() { close(loopDone) })
	// How to start a node again, in the messages.
	restartHint := "with the control endpoint off (-control-port 0), nodes cannot be started again"
	if cfg.controlPort != 0 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", max(cfg.controlPort, 0)))
		if err != nil {
			return fmt.Errorf("control endpoint: %w (another run? -control-port)", err)
		}
		stopControl := serveControl(l, controlHandler(cast, requests, loopDone))
		defer stopControl()
		defer endLoop() // first: the handlers waiting for the loop return
		port := l.Addr().(*net.TCPAddr).Port
		commandPort := ""
		if port != defaultControlPort {
			commandPort = fmt.Sprintf(" -control-port %d", port)
		}
		fmt.Fprintf(out, "devcluster: control at http://127.0.0.1:%d/: go tool task restart --%s <id> starts a node again (stopping it first if it runs), go tool task kill --%s <id> stops one\n",
			port, commandPort, commandPort)
		restartHint = fmt.Sprintf("go tool task restart --%s <id> starts a node again, with its ID and data directory", commandPort)
	}

	// running is each running node's PID, from its start until its exit
	// is read from exits. Only the main loop starts nodes, and only once
	// their last exit has been read.
	running := make(map[*localcluster.Node]int, len(nodes))
	start := func(m member) (answer, error) {
		if err := m.node.Start(); err != nil {
			return answer{}, err
		}
		running[m.node] = m.node.Pid()
		text := fmt.Sprintf("node %s started: pid %d, status http://%s/status", m, m.node.Pid(), m.node.HTTPAddr)
		fmt.Fprintf(out, "devcluster: %s\n", text)
		return answer{http.StatusOK, text}, nil
	}
	for _, m := range cast.all() {
		if _, err := start(m); err != nil {
			localcluster.StopAll(nodes, stopGrace)
			return err
		}
	}
	fmt.Fprintf(out, "devcluster: NATS %s (user %s for applications, see internal/natsconf), Ctrl-C stops\n", natsURL, natsconf.AppUser)
	switch {
	case withKeys && len(authorities) > 0:
		fmt.Fprintf(out, "devcluster: member credentials in %s; each node connects to NATS with its own, which the server checks (refusals in %s)\n",
			filepath.Join(cfg.logDir, "keys"), filepath.Join(natsDir, "callout.log"))
	case withKeys:
		fmt.Fprintf(out, "devcluster: member keys in %s; each node connects as the NATS user of its key\n", filepath.Join(cfg.logDir, "keys"))
	default:
		fmt.Fprintln(out, "devcluster: no member keys (the node binary does not read ELECTION_KEY_FILE, or -keys off): the nodes connect as the shared node user")
	}
	for _, c := range clusters {
		fmt.Fprintf(out, "devcluster: cluster %q: %d %s nodes, status at http://%s/status .. http://%s/status, logs in %s\n",
			c.name, cfg.nodes, c.algorithm, c.first, c.last, filepath.Join(cfg.logDir, c.name))
	}

	fmt.Fprintf(out, "devcluster: kill <pid> kills a node, NATS and the observer keep running; %s\n", restartHint)

	// Watch until a signal arrives: nodes that die, every node included,
	// are reported, and may be started again on request; NATS and the
	// observer keep running.
	var (
		pending = map[*localcluster.Node]request{} // a restart or kill whose process was told to stop
		stops   sync.WaitGroup                     // the stops of pending requests
		byNode  = map[*localcluster.Node]member{}
	)
	for _, m := range cast.all() {
		byNode[m.node] = m
	}
	var observerDone <-chan struct{}
	if observer != nil {
		observerDone = observer.Done()
	}
watch:
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(out, "devcluster: stopping: SIGTERM to every node")
			break watch
		case m := <-leaders:
			printLeader(out, m)
		case <-observerDone:
			observerDone = nil
			fmt.Fprintf(out, "devcluster: the observer (pid %d) exited: %s; see %s\n", observer.Pid(), localcluster.ExitText(observer.ExitErr()), observer.LogPath)
		case e := <-exits:
			m := byNode[e.Node]
			if running[e.Node] == e.Pid {
				delete(running, e.Node)
			}
			text := fmt.Sprintf("node %s (pid %d) exited: %s", m, e.Pid, localcluster.ExitText(e.Err))
			fmt.Fprintf(out, "devcluster: %s; log %s\n", text, e.Node.LogPath)
			if q, ok := pending[e.Node]; ok {
				delete(pending, e.Node)
				a := answer{http.StatusOK, text}
				if q.op == opRestart {
					started, err := start(m)
					if err != nil {
						started = answer{http.StatusInternalServerError, err.Error()}
						fmt.Fprintf(out, "devcluster: node %s: %v\n", m, err)
					}
					a = answer{started.status, text + "; " + started.text}
				}
				q.reply <- a
			}
			if len(running) == 0 && len(pending) == 0 {
				fmt.Fprintf(out, "devcluster: every node has exited; NATS and the observer keep running (%s; Ctrl-C stops)\n", restartHint)
			}
		case q := <-requests:
			if q.op == opList {
				q.reply <- answer{http.StatusOK, listNodes(cast, running)}
				continue
			}
			m := q.member
			if _, busy := pending[m.node]; busy {
				q.reply <- answer{http.StatusConflict, fmt.Sprintf("node %s: a restart or kill is already under way", m)}
				continue
			}
			_, isRunning := running[m.node]
			switch {
			case !isRunning && q.op == opKill:
				q.reply <- answer{http.StatusConflict, fmt.Sprintf("node %s is not running", m)}
			case !isRunning:
				a, err := start(m)
				if err != nil {
					a = answer{http.StatusInternalServerError, err.Error()}
					fmt.Fprintf(out, "devcluster: node %s: %v\n", m, err)
				}
				q.reply <- a
			default:
				// Its exit, read from exits, completes the request.
				pending[m.node] = q
				if q.op == opKill && q.signal == syscall.SIGKILL {
					if err := m.node.Signal(syscall.SIGKILL); err != nil {
						delete(pending, m.node)
						q.reply <- answer{http.StatusInternalServerError, err.Error()}
					}
				} else {
					stops.Go(func() { m.node.Stop(stopGrace) })
				}
			}
		}
	}
	endLoop()
	stops.Wait()

	// Stop the nodes that still run while NATS still runs, so a leader can
	// hand over, and keep printing the leader changes that brings. Nodes
	// that exited earlier were reported when they did.
	var still []*localcluster.Node
	for _, n := range nodes {
		if n.Running() {
			still = append(still, n)
		}
	}
	var (
		results []localcluster.StopResult
		wg      sync.WaitGroup
	)
	stopped := make(chan struct{})
	wg.Go(func() {
		defer close(stopped)
		results = localcluster.StopAll(still, stopGrace)
	})
	for waiting := true; waiting; {
		select {
		case m := <-leaders:
			printLeader(out, m)
		case <-stopped:
			waiting = false
		}
	}
	wg.Wait()
	for len(leaders) > 0 {
		printLeader(out, <-leaders)
	}

	clean := true
	var slowest time.Duration
	for _, r := range results {
		slowest = max(slowest, r.Took)
		switch {
		case r.Killed:
			clean = false
			fmt.Fprintf(out, "devcluster: node %s did not exit within %s and was killed\n", byNode[r.Node], stopGrace)
		case r.Err != nil:
			clean = false
			fmt.Fprintf(out, "devcluster: node %s: %s; see %s\n", byNode[r.Node], localcluster.ExitText(r.Err), r.Node.LogPath)
		}
	}
	if !clean {
		return errors.New("not every node stopped cleanly")
	}
	fmt.Fprintf(out, "devcluster: %d of %d nodes were running; all exited with status 0 (slowest after %s); NATS stopped\n",
		len(still), len(nodes), slowest.Round(time.Millisecond))
	return nil
}

// printLeader prints one leader announcement as one line.
func printLeader(out io.Writer, m *nats.Msg) {
	a, err := protocol.DecodeAnnouncement(m.Data)
	if err != nil {
		fmt.Fprintf(out, "%s  invalid announcement on %s: %v\n", time.Now().Format("15:04:05.000"), m.Subject, err)
		return
	}
	fmt.Fprintf(out, "%s  cluster=%s leader=%d term=%d algorithm=%s\n",
		a.At.Local().Format("15:04:05.000"), a.Cluster, a.Leader, a.Term, a.Algorithm)
}

// listNodes is the answer to GET /nodes: a line per node, with its PID if
// it runs, or how it last exited.
func listNodes(r roster, running map[*localcluster.Node]int) string {
	var b strings.Builder
	for i, m := range r.all() {
		if i > 0 {
			b.WriteByte('\n')
		}
		state := "not started"
		if pid, ok := running[m.node]; ok {
			state = fmt.Sprintf("running, pid %d", pid)
		} else if m.node.Pid() != 0 {
			state = fmt.Sprintf("exited (pid %d): %s", m.node.Pid(), localcluster.ExitText(m.node.ExitErr()))
		}
		fmt.Fprintf(&b, "%s %s, status http://%s/status, log %s", m, state, m.node.HTTPAddr, m.node.LogPath)
	}
	return b.String()
}

// configuredByzantine is how many nodes a byzantine cluster of dynamic
// membership starts from: the fewest that tolerate a liar.
const configuredByzantine = 4

// voters are the Paxos voters of a dynamic cluster of ids: the first
// three (all of them if fewer), ELECTION_VOTERS; the others are
// candidates.
func voters(ids []uint64) string {
	var out []string
	for _, id := range ids[:min(3, len(ids))] {
		out = append(out, strconv.FormatUint(id, 10))
	}
	return strings.Join(out, ",")
}

// startNATS starts the embedded NATS server in dir on port, configured as
// the deployment, with a user for each member key of members; and, for
// the clusters of authorities (cluster name → authority's public key,
// the dynamic clusters with credentials), the server's check of member
// credentials, run in-process: its keys and the authorities it trusts are
// kept in dir/callout, its refusals logged to dir/callout.log.
func startNATS(dir string, port int, members map[string]*signing.MemberKeys, authorities map[string]string) (*server.Server, func(), error) {
	jetstream := filepath.Join(dir, "jetstream")
	if len(authorities) == 0 {
		s, err := natsconf.StartLocal(dir, "127.0.0.1", port, jetstream, members)
		if err != nil {
			return nil, nil, err
		}
		return s, func() { natsconf.Stop(s) }, nil
	}
	authDir := filepath.Join(dir, "callout", "authorities")
	if err := os.MkdirAll(authDir, 0o755); err != nil {
		return nil, nil, err
	}
	for cluster, public := range authorities {
		if err := os.WriteFile(filepath.Join(authDir, cluster+natsauth.AuthoritySuffix), []byte(public+"\n"), 0o644); err != nil {
			return nil, nil, err
		}
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "callout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, stop, err := natsconf.StartLocalWithCallout(dir, "127.0.0.1", port, jetstream, members, filepath.Join(dir, "callout"), authDir, log)
	if err != nil {
		logFile.Close()
		return nil, nil, err
	}
	return s, func() {
		stop()
		logFile.Close()
	}, nil
}
