package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRunning is returned by Node.Start while the node's process runs.
var ErrRunning = errors.New("localcluster: node is already running")

// Spec describes a cluster of node processes.
type Spec struct {
	// Binary is the path of the node binary.
	Binary string
	// NATSURL is passed to every node as NATS_URL.
	NATSURL string
	// Cluster is passed as ELECTION_CLUSTER.
	Cluster string
	// Algorithm is passed as ELECTION_ALGORITHM.
	Algorithm string
	// IDs are the members, passed together as NODE_PEERS; each gets a node.
	IDs []uint64
	// Dynamic runs the nodes with ELECTION_MEMBERSHIP=dynamic instead of
	// NODE_PEERS.
	Dynamic bool
	// HTTPAddrs are the nodes' HTTP_ADDR values, one per ID, host:port.
	HTTPAddrs []string
	// LogDir receives one log file per node, node-<id>.log, holding its
	// stdout and stderr across restarts.
	LogDir string
	// DataDir holds each node's data directory, passed as ELECTION_DATA:
	// DataDir/<cluster>/node-<id>, the same across restarts. Empty means
	// LogDir.
	DataDir string
	// Env is added to the environment the nodes inherit from this process,
	// e.g. timing variables; the contract variables above take precedence.
	Env []string
	// Exits, if not nil, receives an Exit each time a node's process
	// exits. The send never blocks: give the channel room for every exit
	// that matters.
	Exits chan<- Exit
}

// Exit is how one process of a node ended.
type Exit struct {
	Node *Node
	// Pid is the process's ID.
	Pid int
	// Err is its exit error; nil for status 0.
	Err error
}

// Node is one node process. A node can be started again after it exited.
type Node struct {
	// ID is the node's NODE_ID.
	ID uint64
	// HTTPAddr is where its HTTP endpoints listen, host:port.
	HTTPAddr string
	// LogPath is the file its output is appended to.
	LogPath string

	env    []string
	binary string
	exits  chan<- Exit

	mu   sync.Mutex
	proc *process // the process last started, nil before the first start
}

// process is one run of a node's binary.
type process struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when it has exited
	err      error         // its exit error, valid once done is closed
	exitedAt time.Time     // when Wait returned, valid once done is closed
}

// exited reports whether p has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to p; a no-op once it has exited.
func (p *process) signal(id uint64, sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("localcluster: signal node %d: %w", id, err)
	}
	return nil
}

// NewNodes prepares one Node per ID of spec; it starts nothing.
func NewNodes(spec Spec) ([]*Node, error) {
	if len(spec.HTTPAddrs) != len(spec.IDs) {
		return nil, fmt.Errorf("localcluster: %d HTTP addresses for %d nodes", len(spec.HTTPAddrs), len(spec.IDs))
	}
	if _, err := os.Stat(spec.Binary); err != nil {
		return nil, fmt.Errorf("localcluster: node binary: %w", err)
	}
	if err := os.MkdirAll(spec.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("localcluster: log directory: %w", err)
	}
	peers := make([]string, len(spec.IDs))
	for i, id := range spec.IDs {
		peers[i] = strconv.FormatUint(id, 10)
	}
	dataDir := spec.DataDir
	if dataDir == "" {
		dataDir = spec.LogDir
	}
	base := append(os.Environ(), spec.Env...)
	nodes := make([]*Node, len(spec.IDs))
	for i, id := range spec.IDs {
		env := append(append([]string(nil), base...),
			"NATS_URL="+spec.NATSURL,
			"NODE_ID="+strconv.FormatUint(id, 10),
			membership(spec.Dynamic, peers),
			"ELECTION_ALGORITHM="+spec.Algorithm,
			"ELECTION_CLUSTER="+spec.Cluster,
			"HTTP_ADDR="+spec.HTTPAddrs[i],
			"ELECTION_DATA="+filepath.Join(dataDir, spec.Cluster, fmt.Sprintf("node-%d", id)),
		)
		nodes[i] = &Node{
			ID:       id,
			HTTPAddr: spec.HTTPAddrs[i],
			LogPath:  filepath.Join(spec.LogDir, fmt.Sprintf("node-%d.log", id)),
			env:      env,
			binary:   spec.Binary,
			exits:    spec.Exits,
		}
	}
	return nodes, nil
}

// Setenv sets kv (KEY=value) in the environment of the node's next start.
func (n *Node) Setenv(kv string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.env = append(n.env, kv)
}

// Start starts the node's process. Its output is appended to LogPath. The
// process gets its own process group, so a Ctrl-C in the terminal reaches
// only the tool, which then stops the nodes in order; on Linux it is also
// killed if the tool dies.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.exited() {
		return fmt.Errorf("%w: node %d", ErrRunning, n.ID)
	}
	logFile, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localcluster: node %d log: %w", n.ID, err)
	}
	fmt.Fprintf(logFile, "--- localcluster: starting node %d at %s\n", n.ID, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(n.binary)
	cmd.Env = n.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("localcluster: start node %d: %w", n.ID, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	n.proc = p
	// Owned by the node: Wait (and StopAll) block until it has finished.
	go func() {
		err := cmd.Wait()
		pid := cmd.Process.Pid
		fmt.Fprintf(logFile, "--- localcluster: node %d (pid %d) exited at %s: %s\n", n.ID, pid, time.Now().Format(time.RFC3339Nano), ExitText(err))
		logFile.Close()
		n.mu.Lock()
		p.err, p.exitedAt = err, time.Now()
		n.mu.Unlock()
		close(p.done)
		if n.exits != nil {
			select {
			case n.exits <- Exit{Node: n, Pid: pid, Err: err}:
			default:
			}
		}
	}()
	return nil
}

// current is the process last started, nil if none.
func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Pid is the process ID of the process last started, 0 if none.
func (n *Node) Pid() int {
	p := n.current()
	if p == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Done is closed when the process last started has exited; nil if the
// node was never started.
func (n *Node) Done() <-chan struct{} {
	p := n.current()
	if p == nil {
		return nil
	}
	return p.done
}

// Running reports whether the process last started is still running.
func (n *Node) Running() bool {
	p := n.current()
	return p != nil && !p.exited()
}

// Signal sends sig to the running process. It is a no-op once the process
// has exited.
func (n *Node) Signal(sig syscall.Signal) error {
	p := n.current()
	if p == nil {
		return nil
	}
	return p.signal(n.ID, sig)
}

// ExitErr is the exit error of the process last started once it has
// exited; nil while it runs or after status 0.
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return nil
	}
	return n.proc.err
}

// ExitedAt is when the process last started was seen to exit; zero while
// it runs.
func (n *Node) ExitedAt() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return time.Time{}
	}
	return n.proc.exitedAt
}

// Wait blocks until the process last started has exited and returns its
// exit error (nil for status 0). It returns nil at once if the node was
// never started.
func (n *Node) Wait() error {
	p := n.current()
	if p == nil {
		return nil
	}
	return n.wait(p)
}

// wait blocks until p has exited and returns its exit error.
func (n *Node) wait(p *process) error {
	<-p.done
	n.mu.Lock()
	defer n.mu.Unlock()
	return p.err
}

// StopResult is how a node's process ended.
type StopResult struct {
	Node *Node
	// Err is the exit error; nil for status 0.
	Err error
	// Killed tells that it did not exit within the grace period.
	Killed bool
	// Took is the time from SIGTERM to exit.
	Took time.Duration
}

// Stop sends SIGTERM to the process last started and waits up to grace
// for it to exit; then it kills the process and waits for that. It waits
// for that process only, even if the node is started again meanwhile.
func (n *Node) Stop(grace time.Duration) StopResult {
	res := StopResult{Node: n}
	p := n.current()
	if p == nil {
		return res
	}
	start := time.Now()
	_ = p.signal(n.ID, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.signal(n.ID, syscall.SIGKILL)
		res.Killed = true
	}
	res.Err = n.wait(p)
	res.Took = time.Since(start)
	return res
}

// StopAll stops all nodes at once, as Stop does, and waits for every one.
func StopAll(nodes []*Node, grace time.Duration) []StopResult {
	results := make([]StopResult, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { results[i] = n.Stop(grace) })
	}
	wg.Wait()
	return results
}

// membership is the variable that gives a node its members: NODE_PEERS,
// or with dynamic membership ELECTION_MEMBERSHIP.
func membership(dynamic bool, peers []string) string {
	if dynamic {
		return "ELECTION_MEMBERSHIP=dynamic"
	}
	return "NODE_PEERS=" + strings.Join(peers, ",")
}
