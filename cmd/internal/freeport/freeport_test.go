package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The addresses are distinct, free, on the loopback, and below the
// kernel's ephemeral range, where outgoing connections take no port.
func TestAddrsBelowTheEphemeralRange(t *testing.T) {
	addrs, err := Addrs(20)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[string]bool{}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q: want 127.0.0.1:port (%v)", a, err)
		}
		p, _ := strconv.Atoi(port)
		if p < minFixedPort || p >= low {
			t.Errorf("port %d, want in [%d, %d)", p, minFixedPort, low)
		}
		if seen[a] {
			t.Errorf("address %s twice", a)
		}
		seen[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("address %s not free: %v", a, err)
			continue
		}
		l.Close()
	}
}
