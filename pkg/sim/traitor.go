package sim

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

// MemberKeys returns deterministic Ed25519 keys for members: member id's
// seed is the SHA-256 of a fixed label and id, so that every run, and
// every test that needs keys, gets the same ones for the same IDs. They
// are for simulations and tests only.
func MemberKeys(members []uint64) (*certify.Keys, map[uint64]certify.Signer, error) {
	pairs := make(map[uint64]nkeys.KeyPair, len(members))
	signers := make(map[uint64]certify.Signer, len(members))
	for _, id := range members {
		raw := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("baton sim member key"), id))
		pair, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, raw[:])
		if err != nil {
			return nil, nil, fmt.Errorf("sim: key of member %d: %w", id, err)
		}
		pairs[id], signers[id] = pair, keySigner{member: id, key: ed25519.NewKeyFromSeed(raw[:])}
	}
	keys, err := certify.NewKeys(pairs)
	if err != nil {
		return nil, nil, fmt.Errorf("sim: keys: %w", err)
	}
	return keys, signers, nil
}

// keySigner signs as member with the Ed25519 key of its nkeys seed: the
// signatures of certify.KeySigner, without deriving the key again for
// each one.
type keySigner struct {
	member uint64
	key    ed25519.PrivateKey
}

func (s keySigner) Member() uint64                   { return s.member }
func (s keySigner) Sign(data []byte) ([]byte, error) { return ed25519.Sign(s.key, data), nil }

// InjectTo puts one copy of m on the network to member to only, as its
// sender, a member that does not run here (see Inject). m may be a
// broadcast (To 0): a liar that tells each member something different
// sends each its own broadcast.
func (c *Cluster) InjectTo(m protocol.Message, to uint64) error {
	m.V = protocol.Version
	if err := protocol.Validate(m, c.members); err != nil {
		return err
	}
	if c.node(m.From).up() {
		return fmt.Errorf("sim: %d runs here: only a member that does not may be injected as", m.From)
	}
	if _, member := slices.BinarySearch(c.members, to); !member || m.To != 0 && m.To != to || to == m.From {
		return fmt.Errorf("sim: a copy of %v for %d", m, to)
	}
	c.logf("inject %v to %d", m, to)
	for _, k := range c.checks {
		k.sent(m, "injected by", m.From)
	}
	c.send(m, to)
	return nil
}

// Lie is one copy a traitor sends: Message to member To, or to every
// other member if To is 0.
type Lie struct {
	Message protocol.Message
	To      uint64
}

// TraitorConfig configures a Traitor.
type TraitorConfig struct {
	// ID is the traitor's member ID; Signer signs with its own key.
	ID     uint64
	Signer certify.Signer
	// Cluster is the cluster's name, signed into its statements.
	Cluster string
	// Members are every member's IDs, the traitor's included.
	Members []uint64
	// Current, if not nil, returns the members of the traitor's term
	// when the member set changes (its shadow's, the traitor's
	// included): its lies name them, and the terms it leads are theirs.
	// Members are then every ID a message may name.
	Current func() []uint64
	// Accomplices are the traitors' IDs, its own included: they vote
	// together for a leader of their own (the lowest of them).
	Accomplices []uint64
	// Rank is the members' rank (election.Config.Rank), which orders the
	// designated leaders of the terms; the zero value ranks by ID.
	Rank election.Rank
	// Shadow, if not nil, is an honest machine of the traitor's own (its
	// ID, its signer) that it runs, feeds and ticks, and whose output it
	// bends: it withholds, equivocates, replays. Nil: it only lies.
	Shadow election.Machine
	// Rand is its only source of randomness about the election.
	Rand *rand.Rand
	// Orders, if not nil, is an honest agreement machine of the
	// traitor's own (its ID, its signer) for the orders, whose output it
	// bends (ReceiveOrder, TickOrders); as the certified leader it issues
	// lies (IssueOrder). It draws on OrderRand, not on Rand, so that its
	// lies about the election do not depend on the orders. OrderSigner
	// signs its relays (its own key; Signer if nil); with OrderKeys, the
	// members' public keys, it also keeps the other members' signed
	// relays to frame them (FramedEvidence).
	Orders      *agreement.Machine
	OrderSigner certify.Signer
	OrderKeys   certify.Verifier
	OrderRand   *rand.Rand
}

// Traitor is a member of the byzantine algorithm that lies with its own
// key: it equivocates (a different broadcast to different members),
// votes for two leaders in one term, withholds and replays messages,
// claims near-ceiling terms with proofs of its own making, signs
// time-outs at random, and answers each member differently. Everything it
// signs is signed with its own key: it cannot forge another member's
// signature. Its lies are valid messages (protocol.Validate); what it
// says is false. It is a pure value: Receive and Tick return what to send.
// With TraitorConfig.Orders it also lies about the leader's orders
// (ReceiveOrder, TickOrders, IssueOrder, FramedEvidence).
type Traitor struct {
	cfg     TraitorConfig
	rng     *rand.Rand
	desc    []uint64 // members, highest rank first
	high    uint64   // the highest term it saw in a copy
	sent    []protocol.Message
	certs   []certify.Certificate        // certificates it saw, newest last
	tcs     []certify.TimeoutCertificate // time-out certificates it saw
	out     []Lie
	invalid int
	signed  map[signedKey][]byte // its votes' and time-outs' signatures, bounded by maxSigned
	// gave are the time-outs it saw, term → member → signature, for the
	// highest maxKept terms: it assembles real time-out certificates.
	gave map[uint64]map[uint64][]byte
	// orders is its part in the agreement on the orders, nil without
	// TraitorConfig.Orders.
	orders *orderLiar
}

// maxSigned bounds the signatures a traitor keeps to sign a statement
// again without the cost (Ed25519 signatures are deterministic).
const maxSigned = 1024

// signedKey is a vote or time-out of the traitor's (its cluster and
// member are fixed).
type signedKey struct {
	kind         certify.Kind
	term, leader uint64
}

// maxKept bounds what a traitor keeps of the messages it sent and the
// certificates it saw.
const maxKept = 32

// NewTraitor returns a traitor; a Shadow is started at once.
func NewTraitor(cfg TraitorConfig) *Traitor {
	desc := descending(cfg.Rank, cfg.Members)
	t := &Traitor{cfg: cfg, rng: cfg.Rand, desc: desc, signed: map[signedKey][]byte{}, gave: map[uint64]map[uint64][]byte{}}
	if cfg.Orders != nil {
		signer := cfg.OrderSigner
		if signer == nil {
			signer = cfg.Signer
		}
		t.orders = &orderLiar{id: cfg.ID, cluster: cfg.Cluster, signer: signer, keys: cfg.OrderKeys, members: slices.Clone(cfg.Members),
			accomplices: slices.Clone(cfg.Accomplices), m: cfg.Orders, rng: cfg.OrderRand, seq: map[uint64]uint64{},
			signed: map[framedKey]certify.SignedStatement{}}
	}
	if cfg.Shadow != nil {
		cfg.Shadow.Start()
		t.bend(cfg.Shadow.Ready())
	}
	return t
}

// ID is the traitor's member ID.
func (t *Traitor) ID() uint64 { return t.cfg.ID }

// Receive hands the traitor a copy that reached it.
func (t *Traitor) Receive(m protocol.Message) {
	if !slices.Contains(t.cfg.Accomplices, m.From) {
		t.high = max(t.high, min(m.Term, protocol.MaxTerm/2))
	}
	if st := m.Statement; m.Type == protocol.TypeBzTimeout && st != nil && st.Statement.Member == m.From {
		t.keepTimeout(st.Statement.Term, m.From, st.Signature)
	}
	if m.Cert != nil {
		t.certs = keep(t.certs, *m.Cert)
	}
	if m.TC != nil {
		t.tcs = keep(t.tcs, *m.TC)
	}
	if t.cfg.Shadow != nil {
		t.cfg.Shadow.Step(m)
		t.bend(t.cfg.Shadow.Ready())
	}
}

// Tick advances the traitor by one tick and returns what it sends: its
// shadow's output, bent, and lies of its own.
func (t *Traitor) Tick() []Lie {
	if t.cfg.Shadow != nil {
		t.cfg.Shadow.Tick()
		t.bend(t.cfg.Shadow.Ready())
	}
	for range t.rng.IntN(3) {
		t.lies(t.term())
	}
	out := t.out
	t.out = nil
	return out
}

// term is the term the traitor acts in: its shadow's, or the highest it
// saw.
func (t *Traitor) term() uint64 {
	term := t.high
	if t.cfg.Shadow != nil {
		term = max(term, t.cfg.Shadow.Status().Term)
	}
	return max(term, 1)
}

// keepTimeout keeps member's time-out of term x, for the highest maxKept
// terms.
func (t *Traitor) keepTimeout(x, member uint64, sig []byte) {
	if t.gave[x] == nil {
		if len(t.gave) >= maxKept {
			low := x
			for y := range t.gave {
				low = min(low, y)
			}
			if low == x {
				return
			}
			delete(t.gave, low)
		}
		t.gave[x] = map[uint64][]byte{}
	}
	t.gave[x][member] = sig
}

// assembled returns a time-out certificate of the highest term of which
// it holds, with its own, a quorum's time-outs.
func (t *Traitor) assembled() (certify.TimeoutCertificate, bool) {
	best, found := uint64(0), false
	for x, by := range t.gave {
		if len(by)+1 >= certify.Quorum(len(t.current())) && x >= best {
			best, found = x, true
		}
	}
	if !found {
		return certify.TimeoutCertificate{}, false
	}
	var all []certify.SignedStatement
	for member, sig := range t.gave[best] {
		if member != t.cfg.ID {
			all = append(all, certify.SignedStatement{Statement: certify.Timeout(t.cfg.Cluster, member, best), Signature: sig})
		}
	}
	if own := t.sign(certify.Timeout(t.cfg.Cluster, t.cfg.ID, best)); own != nil {
		all = append(all, *own)
	}
	tc, err := certify.NewTimeoutCertificate(all)
	return tc, err == nil
}

func keep[T any](s []T, v T) []T {
	if len(s) >= maxKept {
		s = slices.Delete(s, 0, 1)
	}
	return append(s, v)
}

// emit queues m for to (0: every other member), if it is valid: what the
// receivers' runtime would drop is not sent.
func (t *Traitor) emit(m protocol.Message, to uint64) {
	m.From, m.V = t.cfg.ID, protocol.Version
	if to == t.cfg.ID || m.To != 0 && to != m.To {
		return
	}
	if protocol.Validate(m, t.cfg.Members) != nil {
		t.invalid++
		return
	}
	t.out = append(t.out, Lie{Message: m, To: to})
	t.sent = keep(t.sent, m)
}

// Invalid is how many lies the traitor made that no receiver would take
// (protocol.Validate rejects them): it does not send them.
func (t *Traitor) Invalid() int { return t.invalid }

// current returns the members of the traitor's term: Members, or with
// TraitorConfig.Current those of its shadow's term while it is one of
// them.
func (t *Traitor) current() []uint64 {
	if t.cfg.Current != nil {
		if ids := t.cfg.Current(); slices.Contains(ids, t.cfg.ID) {
			return ids
		}
	}
	return t.cfg.Members
}

// descending returns the members of the traitor's term, highest rank
// first.
func (t *Traitor) descending() []uint64 {
	if t.cfg.Current == nil {
		return t.desc
	}
	return descending(t.cfg.Rank, t.current())
}

// descending returns ids sorted by rank, highest first: the order of a
// byzantine term's designated leaders.
func descending(rank election.Rank, ids []uint64) []uint64 {
	desc := slices.Sorted(slices.Values(ids))
	if rank.IsSpread() {
		rank.Sort(desc)
	}
	slices.Reverse(desc)
	return desc
}

// others returns the other members in a random order.
func (t *Traitor) others() []uint64 {
	members := t.current()
	var out []uint64
	for _, i := range t.rng.Perm(len(members)) {
		if id := members[i]; id != t.cfg.ID {
			out = append(out, id)
		}
	}
	return out
}

func (t *Traitor) member() uint64 {
	members := t.current()
	return members[t.rng.IntN(len(members))]
}

func (t *Traitor) sign(s certify.Statement) *certify.SignedStatement {
	key := signedKey{s.Kind, s.Term, s.Leader}
	if sig, ok := t.signed[key]; ok {
		return &certify.SignedStatement{Statement: s, Signature: sig}
	}
	ss, err := certify.Sign(t.cfg.Signer, s)
	if err != nil {
		return nil // an invalid statement: emit drops the message
	}
	if len(t.signed) >= maxSigned {
		clear(t.signed)
	}
	t.signed[key] = ss.Signature
	return &ss
}

// bend sends its shadow's output, bent: each message is withheld, sent
// as it is, or equivocated (one version to some members, another to the
// rest).
func (t *Traitor) bend(rd election.Ready) {
	for _, m := range rd.Messages {
		switch r := t.rng.IntN(8); {
		case r < 2: // withheld
		case r < 4 && m.To == 0: // equivocated
			peers := t.others()
			cut := t.rng.IntN(len(peers) + 1)
			for _, to := range peers[:cut] {
				t.emit(m, to)
			}
			other := t.variant(m)
			for _, to := range peers[cut:] {
				t.emit(other, to)
			}
		case r < 4: // an answer to one member that differs from what the others get
			t.emit(t.variant(m), m.To)
		default:
			t.emit(m, m.To)
		}
	}
}

// variant is another version of m, for the members the traitor tells
// something else.
func (t *Traitor) variant(m protocol.Message) protocol.Message {
	v := m
	switch m.Type {
	case protocol.TypeBzPropose:
		v.Seq = 1 + t.rng.Uint64N(m.Seq+8)
		if t.rng.IntN(2) == 0 {
			v.Cert, v.TC = nil, nil
		}
	case protocol.TypeBzVote:
		// The same term, another leader: a second vote.
		if st := m.Statement; st != nil {
			v.Statement = t.sign(certify.Vote(t.cfg.Cluster, t.cfg.ID, m.Term, t.member()))
		}
	case protocol.TypeBzTimeout:
		if st := m.Statement; st != nil {
			v.Statement = t.sign(certify.Timeout(t.cfg.Cluster, t.cfg.ID, st.Statement.Term+1+t.rng.Uint64N(3)))
		}
	case protocol.TypeBzHello:
		v.Term = t.rng.Uint64N(m.Term + 3)
	case protocol.TypeBzStatus:
		v.Term, v.Cert, v.TC, v.Candidate = t.rng.Uint64N(m.Term+3), nil, nil, 0
	case protocol.TypeBzAck:
		v.Seq = 1 + t.rng.Uint64N(m.Seq+8)
	}
	return v
}

// Lies returns a lie of the traitor's own about term (its current term),
// in one or more copies: one of a vote for two leaders (one to some
// members, another to the rest), a time-out at random or near the
// ceiling, a near-ceiling claim with a proof of its own making, a replay
// of its own, a hello, a proposal it has no right to, acks of rounds
// never sent, a different status to each member, a proposal with an old
// time-out certificate, a real time-out certificate (assembled from the
// time-outs it saw and its own) shown to some members only. Tick tells these lies too; Lies is for a caller
// that runs the traitor's honest machine itself (and hands it, through
// Receive, the copies whose certificates it may replay).
func (t *Traitor) Lies(term uint64) []Lie {
	before := len(t.out)
	t.lies(term)
	lies := slices.Clone(t.out[before:])
	t.out = t.out[:before]
	return lies
}

func (t *Traitor) lies(term uint64) {
	term = max(term, 1)
	switch t.rng.IntN(10) {
	case 0: // two leaders in one term: one to some members, another to the rest
		x := term + t.rng.Uint64N(2)
		a, b := t.member(), t.member()
		if t.rng.IntN(2) == 0 {
			a = t.cfg.Accomplices[0] // the traitors' own leader
		}
		peers := t.others()
		cut := t.rng.IntN(len(peers) + 1)
		for i, to := range peers {
			leader := a
			if i >= cut {
				leader = b
			}
			t.emit(protocol.Message{Type: protocol.TypeBzVote, Term: x, Seq: 1 + t.rng.Uint64N(4), Statement: t.sign(certify.Vote(t.cfg.Cluster, t.cfg.ID, x, leader))}, to)
		}
	case 1: // a time-out at random, near the term or near the ceiling
		x := term + t.rng.Uint64N(uint64(len(t.current())+3))
		if t.rng.IntN(3) == 0 {
			x = protocol.MaxTerm - 1 - t.rng.Uint64N(4)
		}
		t.emit(protocol.Message{Type: protocol.TypeBzTimeout, Term: term, Statement: t.sign(certify.Timeout(t.cfg.Cluster, t.cfg.ID, x))}, 0)
	case 2: // a near-ceiling term, led by itself, with proofs of its own making
		x := t.ownTerm(protocol.MaxTerm - t.descending()[0]*t.rng.Uint64N(4))
		m := protocol.Message{Type: protocol.TypeBzPropose, Term: x, Seq: 1}
		if t.rng.IntN(2) == 0 {
			if v := t.sign(certify.Vote(t.cfg.Cluster, t.cfg.ID, x, t.cfg.ID)); v != nil {
				if c, err := certify.NewCertificate([]certify.SignedStatement{*v}); err == nil {
					m.Cert = &c
				}
			}
		} else if to := t.sign(certify.Timeout(t.cfg.Cluster, t.cfg.ID, x-1)); to != nil {
			if tc, err := certify.NewTimeoutCertificate([]certify.SignedStatement{*to}); err == nil {
				m.TC = &tc
			}
		}
		t.emit(m, 0)
	case 3: // a replay of its own, to one member or all
		if len(t.sent) > 0 {
			m := t.sent[t.rng.IntN(len(t.sent))]
			to := m.To
			if to == 0 && t.rng.IntN(2) == 0 {
				to = t.others()[0]
			}
			t.emit(m, to)
		}
	case 4: // "I am alive": members above the leader get timed out for
		t.emit(protocol.Message{Type: protocol.TypeBzHello, Term: t.rng.Uint64N(term + 2)}, 0)
	case 5: // proposes itself in a term it does not lead, or in one it does without proof
		x := term
		if t.rng.IntN(2) == 0 {
			x = t.ownTerm(term)
		}
		t.emit(protocol.Message{Type: protocol.TypeBzPropose, Term: x, Seq: 1 + t.rng.Uint64N(8)}, 0)
	case 6: // acks of rounds never sent
		t.emit(protocol.Message{Type: protocol.TypeBzAck, To: t.others()[0], Term: term, Seq: 1 + t.rng.Uint64N(64)}, 0)
	case 7: // a different status to each member: another term, an old proof, a leader of its own
		for _, to := range t.others() {
			m := protocol.Message{Type: protocol.TypeBzStatus, To: to, Term: t.rng.Uint64N(term + 3)}
			switch t.rng.IntN(4) {
			case 0:
				if len(t.certs) > 0 {
					c := t.certs[t.rng.IntN(len(t.certs))]
					m.Term, m.Cert, m.Candidate = c.Term, &c, c.Leader
				}
			case 1:
				if len(t.tcs) > 0 {
					c := t.tcs[t.rng.IntN(len(t.tcs))]
					m.Term, m.TC = c.Term+1, &c
				}
			case 2:
				m.Candidate = t.member()
			}
			t.emit(m, to)
		}
	case 9: // a time-out certificate it assembled from what it saw, to some members only
		if tc, ok := t.assembled(); ok && tc.Term+1 <= protocol.MaxTerm {
			peers := t.others()
			for _, to := range peers[:1+t.rng.IntN(len(peers))] {
				t.emit(protocol.Message{Type: protocol.TypeBzStatus, To: to, Term: tc.Term + 1, TC: &tc}, to)
			}
		}
	case 8: // a proposal of its own term carrying an old time-out certificate
		if len(t.tcs) > 0 {
			c := t.tcs[t.rng.IntN(len(t.tcs))]
			x := c.Term + 1
			if t.ownTerm(x) == x {
				t.emit(protocol.Message{Type: protocol.TypeBzPropose, Term: x, Seq: 1 + t.rng.Uint64N(4), TC: &c}, 0)
			}
		}
	}
}

// ownTerm is the smallest term at or above x that the traitor leads, or
// the largest below it near the ceiling.
func (t *Traitor) ownTerm(x uint64) uint64 {
	desc := t.descending()
	n := uint64(len(desc))
	i := uint64(slices.Index(desc, t.cfg.ID))
	x = max(x, 1)
	// terms led by the member of index i are ≡ i+1 (mod n)
	y := x + (i+n-(x-1)%n)%n
	for y > protocol.MaxTerm {
		y -= n
	}
	return y
}
