// Package localcluster runs election clusters on one machine for the
// developer tools (cmd/devcluster, cmd/bench): an embedded NATS server and
// node processes started from the built node binary, configured only by the
// environment variables of the public contract.
//
// It is a test harness, not a supervisor: nothing is restarted on its own,
// and every process that is started must be waited for with Node.Wait (or
// StopAll), which also reaps the goroutine that watches it.
package localcluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrNATSNotReady is returned when the embedded server does not accept
// connections in time, typically because its port is taken.
var ErrNATSNotReady = errors.New("localcluster: nats server not ready")

// StartNATS starts an embedded NATS server listening on host:port (port -1
// picks a free port) and waits until it accepts connections. The caller
// stops it with StopNATS.
func StartNATS(host string, port int) (*server.Server, error) {
	return StartNATSWith(&server.Options{Host: host, Port: port})
}

// StartNATSWith is StartNATS with more options (JetStream, accounts); it
// sets NoLog and NoSigs.
func StartNATSWith(opts *server.Options) (*server.Server, error) {
	host, port := opts.Host, opts.Port
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("localcluster: nats server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		StopNATS(s)
		return nil, fmt.Errorf("%w on %s:%d (is the port in use?)", ErrNATSNotReady, host, port)
	}
	return s, nil
}

// StopNATS shuts the server down and waits until it has stopped.
func StopNATS(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}
