//go:build unix

package localcluster

import (
	"os/exec"
	"syscall"
)

// exitSignal is the signal that ended the process, if one did.
func exitSignal(exit *exec.ExitError) (syscall.Signal, bool) {
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}
