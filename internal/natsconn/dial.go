package natsconn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
)

// Dial retries the first connection for ever, every firstRetry at first and
// backing off to maxRetry.
const (
	firstRetry = 250 * time.Millisecond
	maxRetry   = 2 * time.Second
)

// Dial makes the first connection to servers: with opts and keyOpts (the
// options that authenticate as a member key's nkey user, nil for none),
// again and again until it connects or ctx ends. Each failed attempt is
// logged with its reason, the server's where it answered
// (Attempts). A server that lists no nkey users refuses keyOpts before
// any credential is sent ("nkeys not supported by the server"): Dial then
// logs once why the key is not used and goes on with opts alone, the
// other credentials or none. It reports whether the connection uses
// keyOpts. opts should not retry the first connection by themselves
// (nats.RetryOnFailedConnect): Dial sees each attempt only so.
func Dial(ctx context.Context, servers string, opts, keyOpts []nats.Option, log *slog.Logger) (nc *nats.Conn, withKey bool, err error) {
	withKey = keyOpts != nil
	attempts := Attempts{Log: log}
	// Dials end with ctx, so that a signal is not held up by a server that
	// does not answer; the connection keeps the dialer for its reconnects,
	// which after ctx ends are not wanted either.
	dialer := contextDialer{ctx: ctx, dialer: net.Dialer{Timeout: nats.GetDefaultOptions().Timeout}}
	wait := firstRetry
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		all := append(opts[:len(opts):len(opts)], nats.RetryOnFailedConnect(false), nats.SetCustomDialer(dialer))
		if withKey {
			all = append(all, keyOpts...)
		}
		nc, err = nats.Connect(servers, all...)
		if err == nil {
			log.Info("NATS connected", "url", nc.ConnectedUrlRedacted(), "member_key", withKey)
			return nc, withKey, nil
		}
		if withKey && errors.Is(err, nats.ErrNkeysNotSupported) {
			log.Warn("the NATS server lists no nkey users, so this node cannot connect as the user of its member key: connecting with NATS_USER, NATS_TOKEN or NATS_CREDS if set, else without credentials; the node still signs with its key, but connection events are ignored (list the key as an nkey user to use it)", "err", err)
			withKey = false
			continue
		}
		attempts.Failed(err)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-timer.C:
		}
		wait = min(2*wait, maxRetry)
	}
}

// Attempts logs failed connection attempts: at warn level the first and
// each whose reason differs from the one before, at debug level the
// repeats, so that a long outage does not flood the log. Use it from one
// goroutine at a time (nats.go calls its handlers from one).
type Attempts struct {
	// Log receives the lines.
	Log  *slog.Logger
	last string
}

// Failed logs one failed attempt and its reason.
func (a *Attempts) Failed(err error) {
	reason := "unknown"
	if err != nil {
		reason = err.Error()
	}
	level := slog.LevelWarn
	if reason == a.last {
		level = slog.LevelDebug
	}
	a.last = reason
	a.Log.Log(context.Background(), level, "NATS connection attempt failed", "err", reason)
}

// contextDialer dials until its context ends.
type contextDialer struct {
	ctx    context.Context
	dialer net.Dialer
}

func (d contextDialer) Dial(network, address string) (net.Conn, error) {
	return d.dialer.DialContext(d.ctx, network, address)
}

// Probe opens a connection named name to servers with opts and closes it:
// a node checks with it, at start, that the server delivers connection
// events (their client name is the probe's). The connection's timeout is
// ctx's deadline, if it has one.
func Probe(ctx context.Context, servers, name string, opts []nats.Option) error {
	all := append([]nats.Option{nats.Name(name), nats.NoEcho()}, opts...)
	if deadline, ok := ctx.Deadline(); ok {
		all = append(all, nats.Timeout(time.Until(deadline)))
	}
	nc, err := nats.Connect(servers, all...)
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}
