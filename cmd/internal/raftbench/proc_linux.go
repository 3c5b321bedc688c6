package raftbench

import "syscall"

// sysProcAttr makes the kernel kill a peer if the benchmark dies before it
// can stop its peers.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
