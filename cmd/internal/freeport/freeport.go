// Package freeport picks loopback addresses for the processes that the
// benchmark and the local tools start, each of which binds its own.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Addrs returns n loopback addresses whose ports were free a moment
// ago, below the kernel's range of ephemeral ports where it can: a port
// the kernel handed out (127.0.0.1:0) is the kind it hands out again, to
// the next outgoing connection of any process (a node's to NATS, a
// loader's), which took one between its release here and a node's bind
// ("address already in use") while the benchmark ran its loads.
func Addrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	low := ephemeralLow()
	for tries := 0; len(addrs) < n && tries < 64*n && low > minFixedPort; tries++ {
		port := minFixedPort + rand.IntN(low-minFixedPort)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	for len(addrs) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// minFixedPort is the lowest port Addrs picks: above the well-known
// and the commonly registered ones.
const minFixedPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), or 32768, Linux's default,
// where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 1 || low > 65535 {
		return 32768
	}
	return low
}
