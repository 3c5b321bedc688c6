package localcluster

import "syscall"

// ChildProcAttr is the process attributes of every child the tools start:
// its own process group, so a Ctrl-C in the terminal reaches only the
// tool, and where the system allows, death with the tool.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
