//go:build !unix

package localcluster

import (
	"os/exec"
	"syscall"
)

// exitSignal is the signal that ended the process, if one did; this
// system does not tell.
func exitSignal(*exec.ExitError) (syscall.Signal, bool) { return 0, false }
