package natsconf

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/baton-election/baton/pkg/protocol"
)

// ReadyTimeout bounds Start's wait for the server to accept connections.
const ReadyTimeout = 5 * time.Second

// ErrNotReady is returned by Start when the server does not accept
// connections within ReadyTimeout, typically because its port is taken.
var ErrNotReady = errors.New("natsconf: nats server not ready")

// Start runs an embedded NATS server with opts and waits until it accepts
// connections; it is the one starter of the embedded servers of the local
// run, the benchmark and the tests. It sets NoLog and NoSigs: the server
// logs nothing and leaves signals to the process. The caller stops it with
// Stop.
func Start(opts *server.Options) (*server.Server, error) {
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsconf: nats server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(ReadyTimeout) {
		Stop(s)
		return nil, fmt.Errorf("%w on %s:%d (is the port in use?)", ErrNotReady, opts.Host, opts.Port)
	}
	return s, nil
}

// Stop shuts the server down and waits until it has stopped.
func Stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// StartLocal starts an embedded server configured as a deployment
// (OptionsWithMembers with LocalPasswords): a system account that delivers
// the application account's connection events, the users of the nodes, the
// observer and applications, and a user for each member key of clusters
// (nil: none). The configuration is written into dir; JetStream is stored
// in storeDir unless it is empty. Port -1 picks a free port.
func StartLocal(dir, host string, port int, storeDir string, clusters map[string]*protocol.MemberKeys) (*server.Server, error) {
	opts, err := OptionsWithMembers(dir, host, port, storeDir, LocalPasswords, clusters)
	if err != nil {
		return nil, err
	}
	return Start(opts)
}
