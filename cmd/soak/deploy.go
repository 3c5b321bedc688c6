package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/internal/natsconf"
)

// The deployment: a NATS cluster of three servers (routes between them,
// on 127.0.0.1) and the node processes, each in every election.

// stopGrace is how long a process may take to exit after SIGTERM before
// it is killed (a node exits within 2 s).
const stopGrace = 5 * time.Second

// freePort is a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// serverPort is a TCP port of 127.0.0.1 that was free a moment ago and
// that the system does not hand out to outgoing connections (below its
// ephemeral range, /proc/sys/net/ipv4/ip_local_port_range): a NATS
// server restarted on it finds it free, where an ephemeral port may be
// taken meanwhile by a client's or a route's connection. Where the range
// cannot be read, any free port.
func serverPort() (int, error) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var low int
	if err == nil {
		fmt.Sscan(string(data), &low)
	}
	const floor = 10000
	if low <= floor+100 {
		return freePort()
	}
	for range 100 {
		port := floor + rand.IntN(low-floor)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return freePort()
}

// natsServer is one server of the NATS cluster, started from the
// project's nats-server binary (cmd/natsd) with a configuration file of
// its own; it keeps its ports across restarts.
type natsServer struct {
	index           int
	port, routePort int
	conf, logPath   string
	binary          string
	proc            *proc
}

// URL is where clients connect.
func (s *natsServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// newNATSCluster writes the configurations of a cluster of n servers in
// dir: the accounts and users of the deployment (natsconf.Accounts, the
// passwords given in the environment as deploy/nats.conf has them), and
// routes authenticated by the route user to every other server.
func newNATSCluster(binary, dir string, n int) ([]*natsServer, error) {
	servers := make([]*natsServer, n)
	for i := range servers {
		port, err := serverPort()
		if err != nil {
			return nil, err
		}
		route, err := serverPort()
		if err != nil {
			return nil, err
		}
		servers[i] = &natsServer{
			index: i + 1, port: port, routePort: route, binary: binary,
			conf:    filepath.Join(dir, fmt.Sprintf("nats-%d.conf", i+1)),
			logPath: filepath.Join(dir, fmt.Sprintf("nats-%d.log", i+1)),
		}
	}
	for _, s := range servers {
		var routes []string
		for _, o := range servers {
			if o != s {
				routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://%s:%s@127.0.0.1:%d", natsconf.RouteUser, natsconf.LocalPasswords.Route, o.routePort)))
			}
		}
		conf := fmt.Sprintf(`server_name: soak-nats-%d
host: "127.0.0.1"
port: %d
cluster {
  name: soak
  listen: "127.0.0.1:%d"
  authorization { user: %s, password: $NATS_ROUTE_PASSWORD, timeout: 2 }
  routes: [ %s ]
}
%s`, s.index, s.port, s.routePort, natsconf.RouteUser, strings.Join(routes, ", "), natsconf.Accounts)
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			return nil, err
		}
	}
	return servers, nil
}

// start starts the server and waits until it accepts connections.
func (s *natsServer) start() error {
	var env []string
	for k, v := range natsconf.LocalPasswords.Env() {
		env = append(env, k+"="+v)
	}
	p, err := startProc(s.binary, []string{"-c", s.conf}, env, s.logPath, fmt.Sprintf("nats server %d", s.index))
	if err != nil {
		return err
	}
	s.proc = p
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("nats server %d exited at start (%s); see %s", s.index, localcluster.ExitText(p.err), s.logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop(stopGrace)
			return fmt.Errorf("nats server %d does not accept connections on port %d; see %s", s.index, s.port, s.logPath)
		}
	}
}

// proc is one run of a child process: its output appended to a log
// file, its own process group (localcluster.ChildProcAttr: a Ctrl-C
// reaches the soak only, and the children die with it).
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when it has exited
	err     error         // its exit error, valid once done is closed

	mu       sync.Mutex
	expected bool // the soak stopped it (or is stopping it)
}

// startProc starts binary with args and env added to this process's
// environment, its output appended to logPath.
func startProc(binary string, args, env []string, logPath, name string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "--- soak: starting %s at %s\n", name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = localcluster.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "--- soak: %s (pid %d) exited at %s: %s\n", name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), localcluster.ExitText(err))
		logFile.Close()
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// pid is the process's ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// expect marks the process's exit as the soak's doing.
func (p *proc) expect() {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
}

// wasExpected reports whether the soak stopped the process.
func (p *proc) wasExpected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expected
}

// signal sends sig to the process, unless it has exited.
func (p *proc) signal(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	return nil
}

// kill kills the process and waits for it.
func (p *proc) kill() {
	p.expect()
	_ = p.signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGCONT (in case it is paused) and SIGTERM, waits at most
// grace, then kills it; it returns how long it took to exit and whether
// it had to be killed.
func (p *proc) stop(grace time.Duration) (time.Duration, bool) {
	p.expect()
	start := time.Now()
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return time.Since(start), false
	case <-timer.C:
		_ = p.signal(syscall.SIGKILL)
		<-p.done
		return time.Since(start), true
	}
}
