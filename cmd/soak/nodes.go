package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

// member is one node process of the deployment (one NODE_ID, every
// election), across its runs: its data directory and HTTP port stay.
type member struct {
	id       uint64
	httpAddr string
	logPath  string
	env      []string
	binary   string

	mu     sync.Mutex
	proc   *proc // the run last started; nil before the first
	run    int   // counts the runs
	paused bool
	gone   bool // it left for good
}

// newMember prepares node id: its environment (the public contract's
// variables), data directory and log under out.
func newMember(binary, out string, id uint64, common []string) (*member, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	m := &member{
		id:       id,
		httpAddr: fmt.Sprintf("127.0.0.1:%d", port),
		logPath:  filepath.Join(out, fmt.Sprintf("node-%d.log", id)),
		binary:   binary,
	}
	m.env = append(append(append([]string(nil), common...), localcluster.NodeEnv()...),
		"NODE_ID="+strconv.FormatUint(id, 10),
		"HTTP_ADDR="+m.httpAddr,
		"ELECTION_DATA="+filepath.Join(out, "data", fmt.Sprintf("node-%d", id)),
	)
	return m, nil
}

// start starts a new run of the node.
func (m *member) start() error {
	p, err := startProc(m.binary, nil, m.env, m.logPath, fmt.Sprintf("node %d", m.id))
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc, m.paused = p, false
	m.run++
	m.mu.Unlock()
	return nil
}

// current is the run last started and its number.
func (m *member) current() (*proc, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc, m.run
}

// live reports whether the node runs and is not paused.
func (m *member) live() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.exited() && !m.paused && !m.gone
}

// running reports whether the node's process runs (paused or not).
func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.exited()
}

func (m *member) setPaused(paused bool) error {
	p, _ := m.current()
	sig := syscall.SIGCONT
	if paused {
		sig = syscall.SIGSTOP
	}
	if err := p.signal(sig); err != nil {
		return err
	}
	m.mu.Lock()
	m.paused = paused
	m.mu.Unlock()
	return nil
}

// newPollClient is the client of the polls: an answer of 1,000 statuses
// from a busy process may take a while.
func newPollClient() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// fetchElections asks the node at addr for GET /elections.
func fetchElections(ctx context.Context, c *http.Client, addr string) ([]protocol.Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/elections", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET /elections: %s", resp.Status)
	}
	var sts []protocol.Status
	if err := json.NewDecoder(resp.Body).Decode(&sts); err != nil {
		return nil, fmt.Errorf("GET /elections: %w", err)
	}
	return sts, nil
}

// clusterNames are the names of ELECTION_CLUSTERS=soak-{0..n-1}.
func clusterNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "soak-" + strconv.Itoa(i)
	}
	return names
}

// clustersVar is the value of ELECTION_CLUSTERS for n elections.
func clustersVar(n int) string {
	if n == 1 {
		return "soak-0"
	}
	return fmt.Sprintf("soak-{0..%d}", n-1)
}

// idList is ids, comma-separated.
func idList(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}
