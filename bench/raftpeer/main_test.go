package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	peers := "a=127.0.0.1:7001,b=127.0.0.1:7002,c=127.0.0.1:7003"
	o, err := parseFlags([]string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", peers, "-data", "/tmp/x", "-timeouts", "150ms"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if len(o.peers) != 3 || o.peers[1].ID != "b" || o.peers[1].Address != "127.0.0.1:7002" {
		t.Errorf("peers: got %+v", o.peers)
	}
	c := config(o, io.Discard)
	if c.HeartbeatTimeout != 150*time.Millisecond || c.ElectionTimeout != 150*time.Millisecond || c.LeaderLeaseTimeout != 150*time.Millisecond {
		t.Errorf("150ms config: got heartbeat %s, election %s, lease %s", c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout)
	}
	o.timeouts = timingDefault
	if c := config(o, io.Discard); c.HeartbeatTimeout != time.Second || c.ElectionTimeout != time.Second {
		t.Errorf("default config: got heartbeat %s, election %s, want raft's 1s", c.HeartbeatTimeout, c.ElectionTimeout)
	}

	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"no id", []string{"-bind", "127.0.0.1:7002", "-peers", peers, "-data", "d"}, "-id"},
		{"no bind", []string{"-id", "b", "-peers", peers, "-data", "d"}, "-bind"},
		{"no data", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", peers}, "-data"},
		{"no peers", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-data", "d"}, "-peers"},
		{"timeouts", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", peers, "-data", "d", "-timeouts", "1s"}, "-timeouts"},
		{"not a peer", []string{"-id", "z", "-bind", "127.0.0.1:7002", "-peers", peers, "-data", "d"}, "not in -peers"},
		{"other address", []string{"-id", "b", "-bind", "127.0.0.1:7009", "-peers", peers, "-data", "d"}, "differs"},
		{"bad entry", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", "b=127.0.0.1:7002,c", "-data", "d"}, "want ID=host:port"},
		{"bad address", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", "b=127.0.0.1:7002,c=nowhere", "-data", "d"}, "nowhere"},
		{"ID twice", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", "b=127.0.0.1:7002,b=127.0.0.1:7003", "-data", "d"}, "twice"},
		{"address twice", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", "b=127.0.0.1:7002,c=127.0.0.1:7002", "-data", "d"}, "twice"},
		{"extra", []string{"-id", "b", "-bind", "127.0.0.1:7002", "-peers", peers, "-data", "d", "more"}, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

func TestPrinterPrintsChangesOnly(t *testing.T) {
	var out bytes.Buffer
	p := &printer{out: &out}
	p.ready()
	for _, id := range []string{"", "", "a", "a", "", "b"} {
		p.leader(id)
	}
	var got []string
	for line := range strings.Lines(out.String()) {
		f := strings.Fields(line)
		got = append(got, strings.Join(f[:len(f)-1], " "))
	}
	want := "ready|leader -|leader a|leader -|leader b"
	if strings.Join(got, "|") != want {
		t.Errorf("lines: got %q, want %q", strings.Join(got, "|"), want)
	}
}
