package natsauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// File names of the callout's keys in a directory (EnsureKeys).
const (
	// IssuerSeedFile holds the callout issuer's seed (SA…): the responder
	// signs its answers with it.
	IssuerSeedFile = "issuer.seed"
	// UserSeedFile holds the seed (SU…) of the responder's own user, the
	// nkey user of the callout account that auth_callout.auth_users lists.
	UserSeedFile = "user.seed"
)

// Keys are the public keys the server's configuration names.
type Keys struct {
	// Issuer is auth_callout.issuer, A….
	Issuer string
	// User is the responder's nkey user, U….
	User string
}

// EnsureKeys makes the callout's keys in dir where they are missing
// (IssuerSeedFile, UserSeedFile, mode 0600) and returns their public keys.
func EnsureKeys(dir string) (Keys, bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Keys{}, false, fmt.Errorf("natsauth: %w", err)
	}
	made := false
	ensure := func(name string, create func() (nkeys.KeyPair, error)) (string, error) {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			kp, err := create()
			if err != nil {
				return "", err
			}
			seed, _ := kp.Seed()
			if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
				return "", err
			}
			made = true
		}
		kp, err := ReadSeed(path)
		if err != nil {
			return "", err
		}
		return kp.PublicKey()
	}
	issuer, err := ensure(IssuerSeedFile, nkeys.CreateAccount)
	if err != nil {
		return Keys{}, false, fmt.Errorf("natsauth: %w", err)
	}
	user, err := ensure(UserSeedFile, nkeys.CreateUser)
	if err != nil {
		return Keys{}, false, fmt.Errorf("natsauth: %w", err)
	}
	if !nkeys.IsValidPublicAccountKey(issuer) || !nkeys.IsValidPublicUserKey(user) {
		return Keys{}, false, fmt.Errorf("%w: %s must hold an account seed (SA…) and %s a user seed (SU…)", ErrConfig, IssuerSeedFile, UserSeedFile)
	}
	return Keys{Issuer: issuer, User: user}, made, nil
}

// ReadSeed reads the key pair whose seed the file at path holds, alone on
// its line; the file must be readable by its owner only.
func ReadSeed(path string) (nkeys.KeyPair, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("%s may be read or written by group or others (mode %04o): chmod 600 it (0400 for a Kubernetes Secret)", path, mode)
	}
	data, err := readBounded(path, 1024)
	if err != nil {
		return nil, err
	}
	defer clear(data)
	kp, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kp, nil
}

// Files are where a responder's configuration lives (the variables of the
// NATS image, docs/configuration.md).
type Files struct {
	// IssuerSeed is the callout issuer's seed file
	// (NATS_CALLOUT_ISSUER_SEED_FILE).
	IssuerSeed string
	// UserSeed is the responder's user seed file
	// (NATS_CALLOUT_USER_SEED_FILE).
	UserSeed string
	// Authorities is the directory of <cluster>.authority and
	// <cluster>.revoked files (NATS_CALLOUT_AUTHORITIES_DIR).
	Authorities string
	// Account is the application account (NATS_CALLOUT_ACCOUNT).
	Account string
}

// Load reads the files and returns the responder and its user's key pair.
func (f Files) Load(log *slog.Logger) (*Responder, nkeys.KeyPair, error) {
	issuer, err := ReadSeed(f.IssuerSeed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: callout issuer: %v", ErrConfig, err)
	}
	user, err := ReadSeed(f.UserSeed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: callout user: %v", ErrConfig, err)
	}
	if public, _ := user.PublicKey(); !nkeys.IsValidPublicUserKey(public) {
		return nil, nil, fmt.Errorf("%w: callout user: %s holds no user seed (SU…)", ErrConfig, f.UserSeed)
	}
	authorities, err := LoadAuthorities(f.Authorities)
	if err != nil {
		return nil, nil, err
	}
	r, err := New(Config{Issuer: issuer, Account: f.Account, Authorities: authorities, RevokedDir: f.Authorities, Log: log})
	if err != nil {
		return nil, nil, err
	}
	return r, user, nil
}

// InProcess is a responder answering its server's requests over an
// in-process connection (StartInProcess).
type InProcess struct {
	nc   *nats.Conn
	done chan struct{} // closed when the goroutine has returned
	err  error         // what ended it, once done is closed
}

// StartInProcess connects to the server s in-process as the responder's
// user (user: its key pair, with the seed), subscribes to the server's
// authorization requests and answers them in a goroutine of its own until
// Stop, or until the server shuts down. The server must be ready for
// connections; when StartInProcess returns, the server hands the
// responder its requests.
func StartInProcess(s nats.InProcessConnProvider, user nkeys.KeyPair, r *Responder) (*InProcess, error) {
	public, err := user.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	nc, err := nats.Connect("", nats.InProcessServer(s), nats.Nkey(public, user.Sign),
		nats.Name("baton-auth"), nats.NoReconnect())
	if err != nil {
		return nil, fmt.Errorf("natsauth: connect as the callout user %s: %w", public, err)
	}
	sub, err := r.subscribe(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p := &InProcess{nc: nc, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = r.serve(context.Background(), sub)
	}()
	return p, nil
}

// Stop closes the responder's connection and waits until its goroutine
// has returned.
func (p *InProcess) Stop() {
	p.nc.Close()
	<-p.done
}

// Done is closed once the responder has stopped answering: after Stop,
// or when its connection closed (the server shut down); Err then says
// why.
func (p *InProcess) Done() <-chan struct{} { return p.done }

// Err is what ended the responder, once Done is closed: nil after Stop.
func (p *InProcess) Err() error {
	<-p.done
	return p.err
}
