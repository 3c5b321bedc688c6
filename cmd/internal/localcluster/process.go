package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a service process other than a node (the observer), started
// by StartProcess and stopped with Stop.
type Process struct {
	// LogPath is the file its output is appended to.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit error, valid once done is closed
}

// StartProcess starts binary with env added to this process's
// environment, its output appended to logPath.
func StartProcess(binary, logPath string, env []string) (*Process, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localcluster: log: %w", err)
	}
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("localcluster: start %s: %w", binary, err)
	}
	p := &Process{LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = cmd.Wait()
		logFile.Close()
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr is the process's exit error once Done is closed; nil for status
// 0, and while it runs.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends SIGTERM, waits at most grace for the process to exit, then
// kills it; it returns once the process has exited.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.done
	}
}
