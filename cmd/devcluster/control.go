package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
)

// The control endpoint: a running devcluster serves HTTP on 127.0.0.1 at
// -control-port, and the commands restart, kill and nodes of this same
// binary (go tool task restart -- 3) are its client:
//
//	POST /restart?node=<ref>              start the node; a running node is stopped first (SIGTERM, SIGKILL after the grace)
//	POST /kill?node=<ref>[&signal=KILL]   stop a running node: SIGTERM (SIGKILL after the grace), or SIGKILL at once
//	GET  /nodes                           one line per node: PID or how it exited, status URL
//
// <ref> is a node's ID, or <cluster>/<id> (required with several
// clusters). The answers are text, one line; an error has status 400 (no
// such node), 409 (not running, or another request for the node under
// way) or 503 (devcluster is stopping).

// defaultControlPort is the control endpoint's port unless -control-port
// says otherwise: beside the observer's 8080 and the nodes' 8081...
const defaultControlPort = 8079

// controlTimeout bounds a control request: a restart waits for the node
// to stop, up to stopGrace, then starts it.
const controlTimeout = 30 * time.Second

// The operations of the control endpoint, as the main loop carries them
// out.
type operation int

const (
	opRestart operation = iota
	opKill
	opList
)

// request is one control request, handed to devcluster's main loop, which
// answers on reply (buffered: the loop never waits for the handler).
type request struct {
	op     operation
	member member         // opRestart, opKill
	signal syscall.Signal // opKill: SIGTERM or SIGKILL
	reply  chan answer
}

// answer is the main loop's answer to a request: an HTTP status and one
// line of text.
type answer struct {
	status int
	text   string
}

// member is a node with the name of its cluster.
type member struct {
	cluster string
	node    *localcluster.Node
}

// String is how devcluster names the node: <cluster>/<id>, as control
// requests may.
func (m member) String() string { return fmt.Sprintf("%s/%d", m.cluster, m.node.ID) }

// roster is every node of the run, by cluster; it does not change once
// the run has started.
type roster struct {
	clusters []string // in the order they were made
	nodes    map[string][]*localcluster.Node
}

// all is every node, cluster by cluster.
func (r roster) all() []member {
	var ms []member
	for _, c := range r.clusters {
		for _, n := range r.nodes[c] {
			ms = append(ms, member{c, n})
		}
	}
	return ms
}

// find resolves a node reference: an ID, or <cluster>/<id>. A bare ID
// names a node only if the run has one cluster.
func (r roster) find(ref string) (member, error) {
	if ref == "" {
		return member{}, errors.New("name one node: its ID, or <cluster>/<id>")
	}
	cluster, id, named := strings.Cut(ref, "/")
	if !named {
		cluster, id = "", ref
		if len(r.clusters) == 1 {
			cluster = r.clusters[0]
		}
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return member{}, fmt.Errorf("%q is not a node: give its ID, or <cluster>/<id>", ref)
	}
	if cluster == "" {
		return member{}, fmt.Errorf("node %d of which cluster? name it as <cluster>/%d, one of %s", n, n, strings.Join(r.clusters, ", "))
	}
	nodes, ok := r.nodes[cluster]
	if !ok {
		return member{}, fmt.Errorf("no cluster %q: the clusters are %s", cluster, strings.Join(r.clusters, ", "))
	}
	for _, node := range nodes {
		if node.ID == n {
			return member{cluster, node}, nil
		}
	}
	return member{}, fmt.Errorf("no node %d: the nodes are %d..%d", n, nodes[0].ID, nodes[len(nodes)-1].ID)
}

// controlHandler serves the control endpoint: it checks each request and
// hands it to the main loop on requests, then waits for its answer, for
// the client to give up, or for the loop to end (stopping closed).
func controlHandler(r roster, requests chan<- request, stopping <-chan struct{}) http.Handler {
	ask := func(w http.ResponseWriter, req *http.Request, q request) {
		q.reply = make(chan answer, 1)
		var a answer
		select {
		case requests <- q:
			select {
			case a = <-q.reply:
			case <-stopping:
				a = answer{http.StatusServiceUnavailable, "devcluster is stopping"}
			case <-req.Context().Done():
				return
			}
		case <-stopping:
			a = answer{http.StatusServiceUnavailable, "devcluster is stopping"}
		case <-req.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(a.status)
		fmt.Fprintln(w, a.text)
	}
	fail := func(w http.ResponseWriter, status int, err error) {
		http.Error(w, err.Error(), status)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, req *http.Request) {
		m, err := r.find(req.URL.Query().Get("node"))
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		ask(w, req, request{op: opRestart, member: m})
	})
	mux.HandleFunc("POST /kill", func(w http.ResponseWriter, req *http.Request) {
		m, err := r.find(req.URL.Query().Get("node"))
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		sig, err := parseSignal(req.URL.Query().Get("signal"))
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		ask(w, req, request{op: opKill, member: m, signal: sig})
	})
	mux.HandleFunc("GET /nodes", func(w http.ResponseWriter, req *http.Request) {
		ask(w, req, request{op: opList})
	})
	return mux
}

// parseSignal reads the signal of a kill: TERM (the default) or KILL.
func parseSignal(s string) (syscall.Signal, error) {
	switch strings.TrimPrefix(strings.ToUpper(s), "SIG") {
	case "", "TERM":
		return syscall.SIGTERM, nil
	case "KILL":
		return syscall.SIGKILL, nil
	}
	return 0, fmt.Errorf("signal %q: TERM or KILL", s)
}

// serveControl serves handler on l until stop is called, which waits for
// the server and its handlers to finish.
func serveControl(l net.Listener, handler http.Handler) (stop func()) {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l) // ends with http.ErrServerClosed
	}()
	return func() {
		// The handlers return at once: the main loop has ended.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		<-served
	}
}

// commands are the control client's commands, devcluster <command> ...
var commands = map[string]string{
	"restart": "start node <id> (or <cluster>/<id>) of the running devcluster again; a running node is stopped first",
	"kill":    "stop node <id> (or <cluster>/<id>) of the running devcluster: SIGTERM, or SIGKILL with -signal KILL",
	"nodes":   "list the nodes of the running devcluster: PID or how each exited, status URL",
}

// runCommand is the control client: it asks the devcluster running on
// this machine to carry out command with args, prints its answer on out,
// and returns an error if there is none or it refused.
func runCommand(command string, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("devcluster "+command, flag.ContinueOnError)
	fs.SetOutput(errOut)
	port := fs.Int("control-port", defaultControlPort, "the -control-port of the running devcluster")
	signal := "TERM"
	if command == "kill" {
		fs.StringVar(&signal, "signal", "TERM", "TERM: stop as on Ctrl-C, SIGKILL after the grace; KILL: at once, as a crash")
	}
	fs.Usage = func() {
		operand := " <id>|<cluster>/<id>"
		if command == "nodes" {
			operand = ""
		}
		fmt.Fprintf(errOut, "usage: devcluster %s [flags]%s\n%s\n", command, operand, commands[command])
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port < 1 || *port > 65535 {
		return fmt.Errorf("-control-port %d is not a port", *port)
	}
	if _, err := parseSignal(signal); err != nil {
		return fmt.Errorf("-signal: %w", err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", *port)
	method, target := http.MethodPost, base+"/"+command
	switch {
	case command == "nodes":
		if fs.NArg() > 0 {
			return fmt.Errorf("nodes takes no arguments, got %q", fs.Args())
		}
		method, target = http.MethodGet, base+"/nodes"
	case fs.NArg() != 1:
		return fmt.Errorf("%s: name one node: its ID, or <cluster>/<id> (got %q)", command, fs.Args())
	default:
		q := url.Values{"node": {fs.Arg(0)}}
		if command == "kill" {
			q.Set("signal", signal)
		}
		target += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no devcluster answers on 127.0.0.1:%d (is go tool task run running, with this -control-port?): %w", *port, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("the answer of devcluster: %w", err)
	}
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", command, text)
	}
	fmt.Fprintln(out, text)
	return nil
}
