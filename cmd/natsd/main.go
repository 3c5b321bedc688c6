// Command natsd is the NATS server of the deployment: nats-server, with
// the same command line, configuration file and signals, which also runs
// the server's check of member credentials (internal/natsauth) when the
// environment configures it, over an in-process connection. Each server
// of a NATS cluster runs its own, in one queue group: the check adds no
// process and no single point of failure. The Taskfile builds it as
// bin/nats-server, the NATS image's binary.
//
// The check is configured by the environment, all three or none:
//
//	NATS_CALLOUT_ISSUER_SEED_FILE   the callout issuer's seed (SA…), whose
//	                                public key is auth_callout.issuer
//	NATS_CALLOUT_USER_SEED_FILE     the seed (SU…) of the nkey user of the
//	                                callout account that the responder
//	                                connects as (auth_callout.auth_users)
//	NATS_CALLOUT_AUTHORITIES_DIR    <cluster>.authority files, the public
//	                                keys of the authorities of the clusters
//	                                whose members are admitted, and
//	                                <cluster>.revoked, the revoked user keys
//	                                (read for every connection)
//	NATS_CALLOUT_ACCOUNT            the account the members are placed in
//	                                (default BATON)
//
// The configuration file must then hold the matching auth_callout block
// (internal/natsconf renders it: go tool task keys). The authorities are
// read at start; the revocations for every connection.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/baton-election/baton/internal/natsauth"
)

const exe = "nats-server"

// The variables of the credential check.
const (
	envIssuer      = "NATS_CALLOUT_ISSUER_SEED_FILE"
	envUser        = "NATS_CALLOUT_USER_SEED_FILE"
	envAuthorities = "NATS_CALLOUT_AUTHORITIES_DIR"
	envAccount     = "NATS_CALLOUT_ACCOUNT"
)

// readyTimeout bounds the wait for the server to accept the responder's
// connection.
const readyTimeout = 30 * time.Second

func main() {
	fs := flag.NewFlagSet(exe, flag.ExitOnError)
	fs.Usage = func() {
		// On stdout, as nats-server prints its usage.
		fs.SetOutput(os.Stdout)
		fmt.Printf("Usage: %s [options]\n\nThe options of nats-server:\n", exe)
		fs.PrintDefaults()
		fmt.Printf("\nThe server's check of member credentials is configured by %s, %s,\n%s and %s (see the command's documentation).\n",
			envIssuer, envUser, envAuthorities, envAccount)
		os.Exit(0)
	}
	opts, err := server.ConfigureOptions(fs, os.Args[1:], server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", exe, err))
	}
	check, err := configure(opts, os.Getenv)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", exe, err))
	}
	if opts.CheckConfig {
		fmt.Fprintf(os.Stderr, "%s: configuration file %s is valid (%s)\n", exe, opts.ConfigFile, opts.ConfigDigest())
		os.Exit(0)
	}
	server.RedactArgs(os.Args)
	s, err := server.NewServer(opts)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", exe, err))
	}
	s.ConfigureLogger()
	if err := server.Run(s); err != nil {
		server.PrintAndDie(err.Error())
	}
	if check == nil {
		s.WaitForShutdown()
		return
	}
	if err := check.run(s); err != nil {
		s.Fatalf("%v", err) // shuts the server down and exits
	}
}

// check is the credential check a server runs: where its files are.
type check struct {
	files natsauth.Files
}

// configure reads the check's variables with getenv and checks them
// against the server's options: nil when they are unset.
func configure(opts *server.Options, getenv func(string) string) (*check, error) {
	files := natsauth.Files{
		IssuerSeed:  getenv(envIssuer),
		UserSeed:    getenv(envUser),
		Authorities: getenv(envAuthorities),
		Account:     getenv(envAccount),
	}
	if files.Account == "" {
		files.Account = "BATON"
	}
	set := []bool{files.IssuerSeed != "", files.UserSeed != "", files.Authorities != ""}
	if !slices.Contains(set, true) {
		return nil, nil
	}
	if slices.Contains(set, false) {
		return nil, fmt.Errorf("the check of member credentials needs %s, %s and %s, all three", envIssuer, envUser, envAuthorities)
	}
	// Load once here, so that a bad file stops the server before it
	// starts, with a clear error.
	if _, _, err := files.Load(slog.New(slog.DiscardHandler)); err != nil {
		return nil, fmt.Errorf("%s, %s, %s: %w", envIssuer, envUser, envAuthorities, err)
	}
	ac := opts.AuthCallout
	if ac == nil {
		return nil, fmt.Errorf("%s is set, but the configuration has no auth_callout block to hand clients to the check (render it: go tool task keys)", envIssuer)
	}
	issuer, _ := natsauth.ReadSeed(files.IssuerSeed)
	user, _ := natsauth.ReadSeed(files.UserSeed)
	issuerPublic, _ := issuer.PublicKey()
	userPublic, _ := user.PublicKey()
	if ac.Issuer != issuerPublic {
		return nil, fmt.Errorf("%s holds the seed of %s, but auth_callout.issuer is %s", envIssuer, issuerPublic, ac.Issuer)
	}
	if !slices.Contains(ac.AuthUsers, userPublic) {
		return nil, fmt.Errorf("%s holds the seed of %s, which auth_callout.auth_users does not list", envUser, userPublic)
	}
	if !accountHasUser(opts, ac.Account, userPublic) {
		return nil, fmt.Errorf("%s holds the seed of %s, which is no nkey user of the callout account %s", envUser, userPublic, ac.Account)
	}
	if !slices.ContainsFunc(opts.Accounts, func(a *server.Account) bool { return a.Name == files.Account }) {
		return nil, fmt.Errorf("%s: the configuration has no account %q to place the members in", envAccount, files.Account)
	}
	return &check{files: files}, nil
}

// accountHasUser reports whether the nkey user public is configured in
// account.
func accountHasUser(opts *server.Options, account, public string) bool {
	for _, u := range opts.Nkeys {
		if u.Nkey == public && u.Account != nil && u.Account.Name == account {
			return true
		}
	}
	return false
}

// restartWait is how long the check waits before it connects again when
// its connection closed while the server runs.
const restartWait = time.Second

// run runs the check over an in-process connection to s, once s accepts
// connections, until s shuts down: if the check's connection closes while
// s runs, it connects again. It returns an error only if the check
// cannot start.
func (c *check) run(s *server.Server) error {
	down := make(chan struct{})
	go func() {
		s.WaitForShutdown()
		close(down)
	}()
	p, err := c.start(s)
	if err != nil {
		return err
	}
	for {
		select {
		case <-down:
			p.Stop()
			return nil
		case <-p.Done():
		}
		if !s.Running() { // shutting down: its connection went with it
			<-down
			return nil
		}
		s.Warnf("The check of member credentials stopped (%v); connecting again in %v", p.Err(), restartWait)
		for p = nil; p == nil; {
			select {
			case <-down:
				return nil
			case <-time.After(restartWait):
			}
			if p, err = c.start(s); err != nil {
				s.Errorf("%v", err)
			}
		}
	}
}

// start starts the check over an in-process connection to s, once s
// accepts connections.
func (c *check) start(s *server.Server) (*natsauth.InProcess, error) {
	log := slog.New(serverLog{s})
	responder, user, err := c.files.Load(log)
	if err != nil {
		return nil, err
	}
	if !s.ReadyForConnections(readyTimeout) {
		return nil, errors.New("the check of member credentials: the server did not accept connections")
	}
	p, err := natsauth.StartInProcess(s, user, responder)
	if err != nil {
		return nil, err
	}
	public, _ := user.PublicKey()
	s.Noticef("Checking member credentials (issuer %s, as user %s) of clusters %s", responder.Issuer(), public, strings.Join(clusters(c.files.Authorities), ", "))
	return p, nil
}

// clusters names the clusters of the authorities in dir, for the log.
func clusters(dir string) []string {
	a, err := natsauth.LoadAuthorities(dir)
	if err != nil {
		return nil
	}
	var names []string
	for name := range a {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// serverLog writes the responder's log lines to the server's log, at the
// matching level.
type serverLog struct{ s *server.Server }

func (l serverLog) Enabled(context.Context, slog.Level) bool { return true }
func (l serverLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l serverLog) WithGroup(string) slog.Handler            { return l }
func (l serverLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%q", a.Key, a.Value.String())
		return true
	})
	switch {
	case r.Level >= slog.LevelError:
		l.s.Errorf("%s", b.String())
	case r.Level >= slog.LevelWarn:
		l.s.Warnf("%s", b.String())
	case r.Level >= slog.LevelInfo:
		l.s.Noticef("%s", b.String())
	default:
		l.s.Debugf("%s", b.String())
	}
	return nil
}
