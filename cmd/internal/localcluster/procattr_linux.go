package localcluster

import (
	"fmt"
	"os"
	"syscall"
)

// ChildProcAttr is the process attributes of every child the tools start:
// its own process group, so a Ctrl-C in the terminal reaches only the
// tool, and where the system allows, death with the tool.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// DieWithParent asks the system to send sig to this process when the
// process that started it exits, so that a tool outlives neither a parent
// that is killed nor one that exits without passing a signal on (the task
// runner). If the parent has already exited, sig is sent at once. The
// caller catches sig and stops in order. Where the system has no such
// request it does nothing.
func DieWithParent(sig syscall.Signal) error {
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(sig), 0); errno != 0 {
		return fmt.Errorf("localcluster: ask to die with the parent process: %w", errno)
	}
	// The parent may have exited before the request: this process then has
	// a new parent and the request will never fire.
	if os.Getppid() != parent {
		return syscall.Kill(os.Getpid(), sig)
	}
	return nil
}
