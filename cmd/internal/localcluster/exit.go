package localcluster

import (
	"errors"
	"fmt"
	"os/exec"
)

// ExitText says how a process ended, from the error its Wait returned:
// "exit status 0" for nil, "exit status 1", "killed by signal 9 (killed)",
// or the error itself if the process could not be waited for.
func ExitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return err.Error()
	}
	if sig, ok := exitSignal(exit); ok {
		return fmt.Sprintf("killed by signal %d (%s)", int(sig), sig)
	}
	return fmt.Sprintf("exit status %d", exit.ExitCode())
}
