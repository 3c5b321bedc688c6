// Package leader lets an application follow the leader of an election
// cluster: learn it the moment it starts, then every change, and fence its
// work with the leader's term.
//
// # How the leader is found
//
// Current asks on protocol.QuerySubject(cluster); the node that leads
// answers with its Announcement. If no node answers (no leader now, or
// nodes that do not answer queries), Current falls back to the last
// announcement kept by a JetStream stream capturing
// protocol.LeaderSubject(cluster), if there is one (the observer service
// creates such a stream). Watch does the same, subscribing to the leader
// subject first so that no announcement between the answer and the
// subscription is missed, and asks again every resync interval, so an
// announcement lost during a disconnection is made up for.
//
// # What is guaranteed and what is not
//
// Watch never yields a term lower than or equal to one it yielded before:
// an application sees leaders in term order. A slow consumer sees the
// newest leader, not every intermediate one. The stream's last
// announcement may name a leader that has since died, and an answer to the
// query may come from a leader that is just being superseded; the term is
// the fencing token that makes acting on either safe (see Fence).
//
// # Signed clusters
//
// When the nodes have member keys (ELECTION_KEY_FILE), pass the members'
// public keys (their ELECTION_KEYS_FILE, read with
// protocol.ReadMemberKeysFile) with WithKeys: every announcement, whether
// published, answered to a query or read from the stream, must then be
// signed by the member it names as leader, and any other is ignored. An
// application needs no seed: public keys only verify. Without WithKeys,
// anybody who can publish on the leader subject can name a leader.
//
// # Byzantine clusters
//
// A leader of the byzantine algorithm holds its term only with a
// certificate, the votes of a quorum of the members, and its
// announcements carry it. With WithKeys, such an announcement, from any
// of the three paths, counts only if its certificate holds under the
// members' keys (protocol.VerifyAnnouncement); a missing, short, forged
// or other term's certificate is dropped like a bad signature. Without
// keys nothing can tell a certificate from a forgery, so a byzantine
// announcement is never believed: Current returns an error wrapping
// ErrNeedKeys instead of the leader, and Watch yields that error and
// ends. Follow a byzantine cluster with WithKeys, and fence its writes
// with NewCertifiedFence, which admits a term only with its certificate.
//
// # Orders
//
// A byzantine cluster's leader can issue orders on which every honest
// member agrees (package orders runs the agreement beside the nodes).
// Orders yields each order once f+1 members have signed the same
// decision, so that a liar alone cannot fake one; it needs WithKeys.
package leader

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// ErrNoLeader is returned by Current when no leader is known.
var ErrNoLeader = errors.New("leader: no leader known")

// ErrNeedKeys is wrapped by the error of Current and Watch when they read
// a byzantine cluster's announcement without WithKeys, and by a Fence
// without keys asked to check a certificate: a byzantine leader is
// believed only with a certificate checked against the members' keys.
var ErrNeedKeys = protocol.ErrNeedKeys

// ErrUncertified is wrapped by the error of a certified fence (see
// NewCertifiedFence) asked to admit a term without its certificate, or
// with a certificate that does not hold.
var ErrUncertified = protocol.ErrUncertified

// ErrConnectionClosed is the error Watch yields when its NATS connection
// has closed for good.
var ErrConnectionClosed = errors.New("leader: NATS connection closed")

// Defaults of the options.
const (
	DefaultQueryTimeout = time.Second
	DefaultResync       = 5 * time.Second
)

type options struct {
	queryTimeout time.Duration
	resync       time.Duration
	stream       bool
	keys         *protocol.MemberKeys
	rejected     func(error)
}

// Option changes how Current and Watch find the leader.
type Option func(*options)

// WithQueryTimeout bounds how long Current waits for the leader's answer
// and for the stream; DefaultQueryTimeout if not given.
func WithQueryTimeout(d time.Duration) Option { return func(o *options) { o.queryTimeout = d } }

// WithResync sets how often Watch asks for the leader again; 0 never
// does. DefaultResync if not given.
func WithResync(d time.Duration) Option { return func(o *options) { o.resync = d } }

// WithoutStream makes Current and Watch rely on the query alone, never on
// a JetStream stream's last announcement.
func WithoutStream() Option { return func(o *options) { o.stream = false } }

// WithKeys makes Current, Watch and LastAnnounced accept only
// announcements signed by the member they name as leader, with its key
// among keys (the nodes' ELECTION_KEYS_FILE), and, for a byzantine
// cluster, carrying a certificate that holds under keys. A nil keys checks
// nothing, and believes no byzantine announcement.
func WithKeys(keys *protocol.MemberKeys) Option { return func(o *options) { o.keys = keys } }

// WithRejected makes Current and Watch call f with the error of every
// announcement they drop (a missing or wrong signature, a malformed or
// out-of-bounds announcement, one of another cluster), so that a wrong
// key or a forger shows as something other than "no leader". f runs on
// a NATS delivery goroutine and must not block.
func WithRejected(f func(error)) Option { return func(o *options) { o.rejected = f } }

// read decodes an announcement of cluster and, with keys, checks its
// signature; a rejection is reported to WithRejected's function.
func (o options) read(cluster string, m *nats.Msg) (protocol.Announcement, error) {
	a, err := protocol.ReadAnnouncement(o.keys, cluster, m.Data, m.Header)
	if err != nil && o.rejected != nil {
		o.rejected(err)
	}
	return a, err
}

func newOptions(opts []Option) options {
	o := options{queryTimeout: DefaultQueryTimeout, resync: DefaultResync, stream: true}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Current returns the leader of cluster now, or ErrNoLeader. For a
// byzantine cluster without WithKeys, it returns an error wrapping
// ErrNeedKeys.
func Current(ctx context.Context, nc *nats.Conn, cluster string, opts ...Option) (protocol.Announcement, error) {
	if err := protocol.ValidateCluster(cluster); err != nil {
		return protocol.Announcement{}, fmt.Errorf("leader: %w", err)
	}
	return current(ctx, nc, cluster, newOptions(opts))
}

func current(ctx context.Context, nc *nats.Conn, cluster string, o options) (protocol.Announcement, error) {
	ctx, cancel := context.WithTimeout(ctx, o.queryTimeout)
	defer cancel()
	// needKeys is set when a byzantine announcement was read without
	// keys: then "no leader" would hide why.
	var needKeys error
	reply, err := nc.RequestWithContext(ctx, protocol.QuerySubject(cluster), nil)
	if err == nil {
		a, err := o.read(cluster, reply)
		if err == nil {
			return a, nil
		}
		if errors.Is(err, ErrNeedKeys) {
			needKeys = err
		}
	}
	if errors.Is(err, nats.ErrConnectionClosed) {
		return protocol.Announcement{}, fmt.Errorf("leader: %w", err)
	}
	if o.stream && ctx.Err() == nil {
		a, err := lastAnnounced(ctx, nc, cluster, o)
		if err == nil {
			return a, nil
		}
		if errors.Is(err, ErrNeedKeys) {
			needKeys = err
		}
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return protocol.Announcement{}, err // the caller's context ended
	}
	if needKeys != nil {
		return protocol.Announcement{}, needKeysError(cluster, needKeys)
	}
	return protocol.Announcement{}, ErrNoLeader
}

// needKeysError says that cluster's byzantine announcement, refused with
// err, needs WithKeys.
func needKeysError(cluster string, err error) error {
	return fmt.Errorf("leader: cluster %s: %w (use WithKeys)", cluster, err)
}

// LastAnnounced returns the last announcement of cluster kept by the
// JetStream stream that captures its leader subject (the observer creates
// one). It may name a leader that has died since; the query (Current) names
// the live one. Of the options, WithKeys and WithRejected apply.
func LastAnnounced(ctx context.Context, nc *nats.Conn, cluster string, opts ...Option) (protocol.Announcement, error) {
	if err := protocol.ValidateCluster(cluster); err != nil {
		return protocol.Announcement{}, fmt.Errorf("leader: %w", err)
	}
	return lastAnnounced(ctx, nc, cluster, newOptions(opts))
}

func lastAnnounced(ctx context.Context, nc *nats.Conn, cluster string, o options) (protocol.Announcement, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return protocol.Announcement{}, err
	}
	subject := protocol.LeaderSubject(cluster)
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return protocol.Announcement{}, err
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return protocol.Announcement{}, err
	}
	msg, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return protocol.Announcement{}, err
	}
	a, err := protocol.ReadAnnouncement(o.keys, cluster, msg.Data, msg.Header)
	if err != nil && o.rejected != nil {
		o.rejected(err)
	}
	return a, err
}

// Watch yields the leader of cluster as soon as it is known (at once if
// there is one), then every newer leader, in increasing term, until ctx
// ends or the loop stops. It yields an error, and iteration ends after it,
// if it cannot subscribe, when the NATS connection closes for good
// (ErrConnectionClosed): a closed connection can no longer tell of a new
// leader, so silence from it would read as "no change"; and when it reads
// a byzantine announcement without WithKeys (ErrNeedKeys), since it could
// never believe that cluster's leader.
//
//	for a, err := range leader.Watch(ctx, nc, "default") {
//		if err != nil { ... }
//		fmt.Println("leader", a.Leader, "term", a.Term)
//	}
func Watch(ctx context.Context, nc *nats.Conn, cluster string, opts ...Option) iter.Seq2[protocol.Announcement, error] {
	o := newOptions(opts)
	return func(yield func(protocol.Announcement, error) bool) {
		if err := protocol.ValidateCluster(cluster); err != nil {
			yield(protocol.Announcement{}, fmt.Errorf("leader: %w", err))
			return
		}
		var (
			mu     sync.Mutex
			newest protocol.Announcement
			signal = make(chan struct{}, 1)
			// needKeys gets the first byzantine announcement's error
			// when there are no keys.
			needKeys = make(chan error, 1)
		)
		refuse := func(err error) {
			if errors.Is(err, ErrNeedKeys) {
				select {
				case needKeys <- err:
				default:
				}
			}
		}
		offer := func(a protocol.Announcement) {
			mu.Lock()
			defer mu.Unlock()
			if a.Term > newest.Term {
				newest = a
				select {
				case signal <- struct{}{}:
				default:
				}
			}
		}
		closed := nc.StatusChanged(nats.CLOSED)
		defer nc.RemoveStatusListener(closed)
		if nc.IsClosed() {
			yield(protocol.Announcement{}, ErrConnectionClosed)
			return
		}
		sub, err := nc.Subscribe(protocol.LeaderSubject(cluster), func(m *nats.Msg) {
			a, err := o.read(cluster, m)
			if err != nil {
				refuse(needKeysError(cluster, err))
				return
			}
			offer(a)
		})
		if err != nil {
			yield(protocol.Announcement{}, fmt.Errorf("leader: subscribe: %w", err))
			return
		}
		defer sub.Unsubscribe()

		if a, err := current(ctx, nc, cluster, o); err == nil {
			offer(a)
		} else {
			refuse(err)
		}
		var resync <-chan time.Time
		if o.resync > 0 {
			t := time.NewTicker(o.resync)
			defer t.Stop()
			resync = t.C
		}
		var yielded uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-closed:
				yield(protocol.Announcement{}, ErrConnectionClosed)
				return
			case err := <-needKeys:
				yield(protocol.Announcement{}, err)
				return
			case <-signal:
				mu.Lock()
				a := newest
				mu.Unlock()
				if a.Term > yielded {
					yielded = a.Term
					if !yield(a, nil) {
						return
					}
				}
			case <-resync:
				if a, err := current(ctx, nc, cluster, o); err == nil {
					offer(a)
				} else {
					refuse(err)
				}
			}
		}
	}
}

// Newer reports whether a is a later leadership than b: it has a higher
// term. Terms strictly increase from leader to leader, so the higher term
// always wins, whatever the clocks in At say.
func Newer(a, b protocol.Announcement) bool { return a.Term > b.Term }

// ErrStaleTerm is returned by Fence.Admit for a term older than one it
// admitted before.
var ErrStaleTerm = errors.New("leader: stale term")

// Fence is the guard a shared resource keeps against stale leaders: every
// write carries the writer's term, and the fence admits a term only if it
// is not lower than the highest it has admitted. A leader that was
// superseded (and may not know it yet) is then refused as soon as its
// successor has written once. The zero value admits every term. A Fence is
// safe for concurrent use; to survive restarts, persist Term with the
// resource.
//
// In a byzantine cluster a term is a leader's only with its certificate:
// a fence made by NewCertifiedFence admits a term only through
// AdmitCertified, so a member that claims a term it was not voted into
// cannot write.
type Fence struct {
	mu   sync.Mutex
	term uint64
	// cluster and keys are set by NewCertifiedFence: then every term
	// needs its certificate.
	cluster string
	keys    *protocol.MemberKeys
}

// NewCertifiedFence returns the fence of a byzantine cluster's resource:
// it admits a term only with the certificate of that term's leader,
// valid under keys, the members' public keys (AdmitCertified); Admit,
// without one, refuses every term. keys must not be nil.
func NewCertifiedFence(cluster string, keys *protocol.MemberKeys) *Fence {
	return &Fence{cluster: cluster, keys: keys}
}

// Admit admits term if it is at least the highest admitted so far, and
// remembers it; otherwise it returns an error wrapping ErrStaleTerm. A
// certified fence refuses it (ErrUncertified): use AdmitCertified.
func (f *Fence) Admit(term uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys != nil {
		return fmt.Errorf("leader: %w: term %d without its certificate (the fence of byzantine cluster %q admits certified terms only)", ErrUncertified, term, f.cluster)
	}
	return f.admit(term)
}

// AdmitCertified admits the term of the leader's certificate c, as Admit
// does, if c holds: the votes of a quorum of the members for c.Leader in
// c.Term of the fence's cluster, each signed with the member's key
// (certify.VerifyCertificateFor). A writer passes the certificate of its
// announcement (protocol.Announcement.Certificate). A missing or invalid
// certificate wraps ErrUncertified and certify's error; a fence without
// keys (not from NewCertifiedFence) cannot check one, and returns an
// error wrapping ErrNeedKeys.
func (f *Fence) AdmitCertified(c *certify.Certificate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		return fmt.Errorf("leader: %w: the fence has no keys to check a certificate with (NewCertifiedFence)", ErrNeedKeys)
	}
	if c == nil {
		return fmt.Errorf("leader: %w: no certificate", ErrUncertified)
	}
	if err := certify.VerifyCertificateFor(f.keys.Members(), *c, f.cluster, c.Term, c.Leader); err != nil {
		return fmt.Errorf("leader: %w: %w", ErrUncertified, err)
	}
	return f.admit(c.Term)
}

// admit is Admit's rule; f.mu is held.
func (f *Fence) admit(term uint64) error {
	if term < f.term {
		return fmt.Errorf("%w: %d is older than %d", ErrStaleTerm, term, f.term)
	}
	f.term = term
	return nil
}

// Term is the highest term admitted so far, 0 before any.
func (f *Fence) Term() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term
}
