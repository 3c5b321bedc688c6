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
// signing.ReadMemberKeysFile) with WithKeys: every announcement, whether
// published, answered to a query or read from the stream, must then be
// signed by the member it names as leader, and any other is ignored. An
// application needs no seed: public keys only verify. Without WithKeys,
// anybody who can publish on the leader subject can name a leader.
//
// # The cluster's algorithm
//
// How an announcement is checked depends on the cluster's algorithm, and
// the reader knows it from its own configuration, never from the
// announcement: from the members file's statement ("#: algorithm",
// signing.MemberKeys.Algorithm), or WithAlgorithm for a file that
// states none. An announcement of another algorithm is dropped
// (protocol.ErrAlgorithm). With WithKeys and no known algorithm, Current,
// Watch and LastAnnounced refuse to start (ErrNoAlgorithm), and so they do
// for a members file that states another cluster, or a WithAlgorithm that
// contradicts it.
//
// # Byzantine clusters
//
// A leader of the byzantine algorithm holds its term only with a
// certificate, the votes of a quorum of the members, and its
// announcements carry it. With WithKeys, every announcement of a
// byzantine cluster, from any of the three paths and whatever algorithm
// it names, counts only if its certificate holds under the members' keys
// (signing.VerifyAnnouncementOf); a missing, short, forged or other
// term's certificate is dropped like a bad signature. Without keys
// nothing can tell a certificate from a forgery, so a byzantine
// announcement is never believed: Current returns an error wrapping
// ErrNeedKeys instead of the leader, and Watch yields that error and
// ends. Follow a byzantine cluster with WithKeys, and fence its writes
// with NewCertifiedFence, which admits a write only with its term's
// certificate and the certified leader's signature of it (ProveWrite,
// AdmitCertified).
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
	"github.com/baton-election/baton/pkg/signing"
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

// ErrNoAlgorithm is wrapped by the error of Current, Watch and
// LastAnnounced given keys (WithKeys) whose members file states no
// algorithm, without WithAlgorithm: whether an announcement needs a
// certificate depends on the cluster's algorithm, which only the reader's
// configuration can tell, never the announcement.
var ErrNoAlgorithm = protocol.ErrNoAlgorithm

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
	keys         *signing.MemberKeys
	algorithm    protocol.Algorithm
	rejected     func(error)
	streams      *Streams
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
func WithKeys(keys *signing.MemberKeys) Option { return func(o *options) { o.keys = keys } }

// WithAlgorithm tells Current, Watch and LastAnnounced which algorithm the
// cluster runs, for a members file that does not state it ("#: algorithm"
// line; files written by this project do). The algorithm comes from the
// reader's configuration, never from an announcement: an announcement of
// another algorithm is dropped, and in a byzantine cluster one without a
// certificate that holds is dropped whatever algorithm it names. A value
// that contradicts the members file, or is not one of
// protocol.Algorithms, is an error.
func WithAlgorithm(a protocol.Algorithm) Option { return func(o *options) { o.algorithm = a } }

// WithRejected makes Current and Watch call f with the error of every
// announcement they drop (a missing or wrong signature, a malformed or
// out-of-bounds announcement, one of another cluster), so that a wrong
// key or a forger shows as something other than "no leader". f runs on
// a NATS delivery goroutine and must not block.
func WithRejected(f func(error)) Option { return func(o *options) { o.rejected = f } }

// read decodes an announcement of cluster and, with keys, checks its
// signature and, by the cluster's algorithm, its certificate
// (signing.ReadAnnouncementOf); a rejection is reported to WithRejected's
// function.
func (o options) read(cluster string, data []byte, h nats.Header) (protocol.Announcement, error) {
	a, err := signing.ReadAnnouncementOf(o.keys, cluster, o.algorithm, data, h)
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

// readerOf checks cluster and the options of a reader of its
// announcements, and settles the cluster's algorithm: WithAlgorithm's, or
// the one the members file states. With keys it must be known
// (ErrNoAlgorithm); without keys, a byzantine cluster cannot be followed
// (ErrNeedKeys).
func readerOf(cluster string, opts []Option) (options, error) {
	if err := protocol.ValidateCluster(cluster); err != nil {
		return options{}, fmt.Errorf("leader: %w", err)
	}
	o := newOptions(opts)
	alg, err := signing.ClusterAlgorithm(o.keys, cluster, o.algorithm)
	if err != nil {
		return options{}, fmt.Errorf("leader: cluster %s: %w", cluster, err)
	}
	switch {
	case o.keys != nil && alg == "" && !o.keys.Authority():
		// (Member keys from credentials: a cluster with dynamic
		// membership, which is never byzantine.)
		return options{}, fmt.Errorf("leader: cluster %s: %w: the members' keys state no algorithm; state it in the members file or pass WithAlgorithm", cluster, ErrNoAlgorithm)
	case o.keys == nil && alg == protocol.Byzantine:
		return options{}, needKeysError(cluster, fmt.Errorf("%w", ErrNeedKeys))
	}
	o.algorithm = alg
	return o, nil
}

// Current returns the leader of cluster now, or ErrNoLeader. For a
// byzantine cluster without WithKeys, it returns an error wrapping
// ErrNeedKeys.
func Current(ctx context.Context, nc *nats.Conn, cluster string, opts ...Option) (protocol.Announcement, error) {
	o, err := readerOf(cluster, opts)
	if err != nil {
		return protocol.Announcement{}, err
	}
	return current(ctx, nc, cluster, o)
}

func current(ctx context.Context, nc *nats.Conn, cluster string, o options) (protocol.Announcement, error) {
	ctx, cancel := context.WithTimeout(ctx, o.queryTimeout)
	defer cancel()
	// needKeys is set when a byzantine announcement was read without
	// keys: then "no leader" would hide why.
	var needKeys error
	reply, err := nc.RequestWithContext(ctx, protocol.QuerySubject(cluster), nil)
	if err == nil {
		a, err := o.read(cluster, reply.Data, reply.Header)
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
	o, err := readerOf(cluster, opts)
	if err != nil {
		return protocol.Announcement{}, err
	}
	return lastAnnounced(ctx, nc, cluster, o)
}

func lastAnnounced(ctx context.Context, nc *nats.Conn, cluster string, o options) (protocol.Announcement, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return protocol.Announcement{}, err
	}
	subject := protocol.LeaderSubject(cluster)
	streams := o.streams
	if streams == nil {
		streams = &Streams{} // for this read alone
	}
	msg, err := streams.last(ctx, js, subject)
	if err != nil {
		return protocol.Announcement{}, err
	}
	return o.read(cluster, msg.Data, msg.Header)
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
	return func(yield func(protocol.Announcement, error) bool) {
		o, err := readerOf(cluster, opts)
		if err != nil {
			yield(protocol.Announcement{}, err)
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
			a, err := o.read(cluster, m.Data, m.Header)
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
// In a byzantine cluster a term is a leader's only with its certificate,
// and a write is the leader's only with its signature: a fence made by
// NewCertifiedFence admits a write only through AdmitCertified, with the
// leader's certificate and its signature of that write (ProveWrite), so
// that neither a member that claims a term it was not voted into nor one
// that holds the real leader's (public) certificate can write.
type Fence struct {
	mu   sync.Mutex
	term uint64
	// cluster and keys are set by NewCertifiedFence: then every term
	// needs its certificate.
	cluster string
	keys    *signing.MemberKeys
}

// NewCertifiedFence returns the fence of a byzantine cluster's resource:
// it admits a write only with the certificate of its term's leader, valid
// under keys, the members' public keys, and that leader's signature of
// the write (AdmitCertified); Admit, without them, refuses every term.
// keys must not be nil.
func NewCertifiedFence(cluster string, keys *signing.MemberKeys) *Fence {
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

// WriteProof is what a byzantine cluster's leader sends with each write
// to a resource fenced by NewCertifiedFence: its certificate and its
// signature, with its own member key, of the write (certify.Write: the
// cluster, the term, the leader and the SHA-256 of the write, under a
// domain prefix of its own). The certificate is public, so it proves the
// term, not the writer; the signature proves the writer, and binds the
// proof to that one write. ProveWrite makes it.
type WriteProof struct {
	// Certificate is the leader's certificate, as its announcement
	// carries it.
	Certificate *certify.Certificate `json:"certificate"`
	// Signature is the leader's Ed25519 signature of the certify.Write
	// of the write (base64 in JSON).
	Signature []byte `json:"signature"`
}

// ProveWrite is the writer's side of a certified fence: the leader whose
// own certified announcement is a, holding its member key signer (its
// ELECTION_KEY_FILE), proves that write is its own. Send the proof with
// the write; the resource checks it with Fence.AdmitCertified. write is
// the bytes the resource will check, for instance the request's body;
// when a replay of the same write must be refused, include a nonce or
// sequence number the resource chose. A member that is not a's leader,
// or an announcement without a certificate of a's cluster, term and
// leader, is refused.
func ProveWrite(signer *signing.Signer, a protocol.Announcement, write []byte) (WriteProof, error) {
	c := a.Certificate
	switch {
	case signer == nil:
		return WriteProof{}, errors.New("leader: no member key to sign the write with")
	case c == nil:
		return WriteProof{}, fmt.Errorf("leader: %w: the announcement of leader %d in term %d has no certificate", ErrUncertified, a.Leader, a.Term)
	case c.Cluster != a.Cluster || c.Term != a.Term || c.Leader != a.Leader:
		return WriteProof{}, fmt.Errorf("leader: %w: the certificate is of leader %d in term %d of %q, the announcement of leader %d in term %d of %q",
			ErrUncertified, c.Leader, c.Term, c.Cluster, a.Leader, a.Term, a.Cluster)
	case signer.ID() != a.Leader:
		return WriteProof{}, fmt.Errorf("leader: member %d cannot prove a write of leader %d", signer.ID(), a.Leader)
	}
	sig, err := certify.SignWrite(signer.Certify(), certify.WriteOf(c.Cluster, c.Term, c.Leader, write))
	if err != nil {
		return WriteProof{}, fmt.Errorf("leader: %w", err)
	}
	return WriteProof{Certificate: c, Signature: sig}, nil
}

// AdmitCertified is the resource's side of a certified fence: it admits
// write, with the proof p the writer sent (ProveWrite), if the writer is
// the certified leader of a term at least the highest admitted so far,
// and remembers the term. It checks, in this order and with the fence's
// own keys (the members file):
//
//   - p's certificate holds: the votes of a quorum of the members for its
//     leader in its term of the fence's cluster
//     (certify.VerifyCertificateFor); otherwise the error wraps
//     ErrUncertified and certify's error;
//   - p's signature is the certified leader's own over write
//     (certify.VerifyWrite), so that a member or application that holds
//     the public certificate but not the leader's seed, or that replays
//     the proof of another write, is refused (ErrUncertified and
//     certify.ErrSignature);
//   - the term is not older than the highest admitted (ErrStaleTerm).
//
// An equal term is admitted: its writes are all its leader's. A fence
// without keys (not from NewCertifiedFence) cannot check a proof, and
// returns an error wrapping ErrNeedKeys.
func (f *Fence) AdmitCertified(p WriteProof, write []byte) error {
	if f.keys == nil {
		return fmt.Errorf("leader: %w: the fence has no keys to check a certificate with (NewCertifiedFence)", ErrNeedKeys)
	}
	c := p.Certificate
	if c == nil {
		return fmt.Errorf("leader: %w: no certificate", ErrUncertified)
	}
	members, err := f.keys.MembersOf(c.Version)
	if err != nil {
		return fmt.Errorf("leader: %w: %w", ErrUncertified, err)
	}
	if err := certify.VerifyCertificateFor(members, *c, f.cluster, c.Term, c.Leader); err != nil {
		return fmt.Errorf("leader: %w: %w", ErrUncertified, err)
	}
	if err := certify.VerifyWrite(members, certify.WriteOf(f.cluster, c.Term, c.Leader, write), p.Signature); err != nil {
		return fmt.Errorf("leader: %w: the write is not signed by leader %d of term %d: %w", ErrUncertified, c.Leader, c.Term, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
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
