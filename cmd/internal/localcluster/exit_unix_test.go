//go:build unix

package localcluster

import (
	"errors"
	"os/exec"
	"testing"
)

func TestExitText(t *testing.T) {
	for _, c := range []struct {
		script string
		want   string
	}{
		{"exit 0", "exit status 0"},
		{"exit 3", "exit status 3"},
		{"kill -KILL $$", "killed by signal 9 (killed)"},
		{"kill -TERM $$", "killed by signal 15 (terminated)"},
	} {
		err := exec.Command("sh", "-c", c.script).Run()
		if got := ExitText(err); got != c.want {
			t.Errorf("sh -c %q: %q, want %q", c.script, got, c.want)
		}
	}
	if got := ExitText(errors.New("wait: no child")); got != "wait: no child" {
		t.Errorf("another error: %q, want it as it is", got)
	}
}
