package natsconf

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/pkg/signing"
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
func StartLocal(dir, host string, port int, storeDir string, clusters map[string]*signing.MemberKeys) (*server.Server, error) {
	opts, err := OptionsWithMembers(dir, host, port, storeDir, LocalPasswords, clusters)
	if err != nil {
		return nil, err
	}
	return Start(opts)
}

// StartLocalWithCallout is StartLocal with the server's check of member
// credentials (internal/natsauth): it makes the callout's keys in keysDir
// where they are missing (natsauth.EnsureKeys), configures the server
// with them, and runs the responder over an in-process connection,
// trusting the authorities of authoritiesDir (<cluster>.authority, and
// <cluster>.revoked). Members of those clusters then connect with their
// credentials. stop stops the responder, then the server.
func StartLocalWithCallout(dir, host string, port int, storeDir string, clusters map[string]*signing.MemberKeys, keysDir, authoritiesDir string, log *slog.Logger) (s *server.Server, stop func(), err error) {
	keys, _, err := natsauth.EnsureKeys(keysDir)
	if err != nil {
		return nil, nil, err
	}
	files := natsauth.Files{
		IssuerSeed:  filepath.Join(keysDir, natsauth.IssuerSeedFile),
		UserSeed:    filepath.Join(keysDir, natsauth.UserSeedFile),
		Authorities: authoritiesDir,
		Account:     MemberAccount,
	}
	responder, user, err := files.Load(log)
	if err != nil {
		return nil, nil, err
	}
	opts, err := OptionsWith(dir, host, port, storeDir, LocalPasswords, clusters, &Callout{Issuer: keys.Issuer, User: keys.User})
	if err != nil {
		return nil, nil, err
	}
	return StartWithCallout(opts, responder, user)
}

// StartWithCallout is Start with the responder r of the server's check of
// member credentials answering over an in-process connection as user (the
// nkey user of the callout account that opts names). stop stops the
// responder, then the server.
func StartWithCallout(opts *server.Options, r *natsauth.Responder, user nkeys.KeyPair) (*server.Server, func(), error) {
	s, err := Start(opts)
	if err != nil {
		return nil, nil, err
	}
	p, err := natsauth.StartInProcess(s, user, r)
	if err != nil {
		Stop(s)
		return nil, nil, err
	}
	return s, func() {
		p.Stop()
		Stop(s)
	}, nil
}
