package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/baton-election/baton/cmd/internal/localcluster"
)

// burn keeps one core busy until the process is killed. It is the only
// busy loop of the project, and a deliberate one.
func burn() {
	runtime.GOMAXPROCS(1)
	var x uint64 = 1
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Fprintln(os.Stderr, x) // keeps the loop from being optimised away
		}
	}
}

// burners are CPU burner processes, one per core.
type burners []*exec.Cmd

// startBurners starts one burner per core, from this binary.
func startBurners(ctx context.Context) (burners, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("burners: %w", err)
	}
	var bs burners
	for range runtime.NumCPU() {
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), burnerEnv+"=1")
		cmd.SysProcAttr = localcluster.ChildProcAttr()
		if err := cmd.Start(); err != nil {
			bs.stop()
			return nil, fmt.Errorf("burners: %w", err)
		}
		bs = append(bs, cmd)
	}
	return bs, nil
}

// stop kills the burners and waits for them.
func (bs burners) stop() {
	for _, cmd := range bs {
		_ = cmd.Process.Kill()
	}
	for _, cmd := range bs {
		_ = cmd.Wait()
	}
}
