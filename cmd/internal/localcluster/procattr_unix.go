//go:build unix && !linux

package localcluster

import "syscall"

// ChildProcAttr is the process attributes of every child the tools start:
// its own process group, so a Ctrl-C in the terminal reaches only the
// tool, and where the system allows, death with the tool.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// DieWithParent asks the system to send sig to this process when the
// process that started it exits; this system has no such request, so it
// does nothing.
func DieWithParent(sig syscall.Signal) error { return nil }
