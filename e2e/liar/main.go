// Command liar is a lying member of a byzantine cluster, for the
// end-to-end tests only: it runs in its own container as one member, with
// that member's own key and NATS user, and lies in every way its key
// allows. It never votes honestly and never follows a leader. Every tick
// it does one or more of:
//
//   - equivocate: sign two votes of one term for two different leaders
//     (the term's designated leader and itself) and broadcast both, which
//     is proof of lying (certify.Contradicts);
//   - claim leadership with a term near the ceiling (protocol.MaxTerm)
//     that it is designated for, with a forged certificate or without one,
//     and announce itself as leader with a forged certificate;
//   - sign time-outs of random terms;
//   - replay messages it captured (the others' and its own), verbatim;
//   - answer each peer with a different bz_status (another term, another
//     leader, a forged certificate);
//   - answer every query for the leader (election.<cluster>.query) with
//     that forged announcement of itself.
//
// It serves GET /healthz and GET /lies (the counts of what it did, JSON)
// on HTTP_ADDR. Its environment is the node's: NATS_URL, NODE_ID,
// NODE_PEERS, ELECTION_CLUSTER, ELECTION_KEY_FILE, ELECTION_KEYS_FILE.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// tick is how often the liar lies.
const tick = 150 * time.Millisecond

// inboxSize bounds the messages waiting for the liar's loop.
const inboxSize = 256

// captured bounds the messages kept for replay.
const captured = 32

// The kinds of lie, as counted and served on /lies.
const (
	lieEquivocation  = "equivocations"       // pairs of contradicting votes
	lieCeilingClaim  = "ceiling_claims"      // bz_propose near the ceiling
	lieForgedCert    = "forged_certificates" // certificates with forged signatures
	lieAnnouncement  = "false_announcements" // announcements of itself as leader
	lieTimeout       = "random_timeouts"     // time-outs of random terms
	lieReplay        = "replays"             // captured messages sent again
	lieSplitStatuses = "split_statuses"      // bz_status, different to each peer
	lieQueryAnswer   = "false_query_answers" // answers to queries naming itself
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.Error("liar", "err", err)
		os.Exit(1)
	}
}

type raw struct {
	subject string
	data    []byte
	header  nats.Header
}

type liar struct {
	log     *slog.Logger
	cluster string
	id      uint64
	desc    []uint64 // members, highest first
	nc      *nats.Conn
	signer  *signing.Signer
	votes   *certify.KeySigner
	stamp   *protocol.Stamp
	rng     *mrand.Rand

	// Owned by the loop.
	term       uint64 // the highest term heard from the others
	seq        uint64 // the round of the last propose heard
	equivTerm  uint64 // the term it last equivocated in
	equivAt    time.Time
	incs       map[uint64]uint64 // member → its incarnation, as heard
	others     []raw             // captured messages of the others
	own        []raw             // its own, sent
	step       int
	claimRound uint64

	mu     sync.Mutex
	counts map[string]int
}

func run(ctx context.Context, log *slog.Logger) error {
	id, err := strconv.ParseUint(os.Getenv("NODE_ID"), 10, 64)
	if err != nil || id == 0 {
		return fmt.Errorf("NODE_ID %q: want a positive integer", os.Getenv("NODE_ID"))
	}
	var members []uint64
	for p := range strings.SplitSeq(os.Getenv("NODE_PEERS"), ",") {
		m, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil || m == 0 {
			return fmt.Errorf("NODE_PEERS %q: want positive integers", os.Getenv("NODE_PEERS"))
		}
		members = append(members, m)
	}
	slices.Sort(members)
	slices.Reverse(members)
	cluster := os.Getenv("ELECTION_CLUSTER")
	if err := protocol.ValidateCluster(cluster); err != nil {
		return fmt.Errorf("ELECTION_CLUSTER: %w", err)
	}
	kp, err := signing.ReadSeedFile(os.Getenv("ELECTION_KEY_FILE"))
	if err != nil {
		return fmt.Errorf("ELECTION_KEY_FILE: %w", err)
	}
	signer, err := signing.NewSigner(id, kp)
	if err != nil {
		return err
	}
	votes, err := certify.NewSigner(id, kp)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(os.Getenv("NATS_URL"),
		nats.Nkey(signer.PublicKey(), kp.Sign),
		nats.Name(protocol.ConnectionName(cluster, id)),
		nats.CustomInboxPrefix(protocol.InboxPrefix(cluster, id)),
		nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect as member %d: %w", id, err)
	}
	defer nc.Close()

	l := &liar{
		log: log.With("member", id), cluster: cluster, id: id, desc: members, nc: nc, signer: signer, votes: votes,
		stamp: protocol.NewStamp(uint64(time.Now().UnixNano())), rng: mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), id)),
		incs: map[uint64]uint64{}, counts: map[string]int{},
	}
	inbox := make(chan *nats.Msg, inboxSize)
	handler := func(m *nats.Msg) {
		select {
		case inbox <- m:
		default: // the liar does not care what it misses
		}
	}
	subjects := append(protocol.BroadcastSubjectsOf(cluster, protocol.Byzantine), protocol.InboxSubject(cluster, id), protocol.QuerySubject(cluster))
	for _, s := range subjects {
		if _, err := nc.Subscribe(s, handler); err != nil {
			return fmt.Errorf("subscribe %s: %w", s, err)
		}
	}

	ln, err := net.Listen("tcp", envOr("HTTP_ADDR", ":8080"))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /lies", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(l.snapshot())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shut)
		<-served
	}()

	l.log.Info("lying", "cluster", cluster, "members", members)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	report := time.NewTicker(5 * time.Second)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		case m := <-inbox:
			l.hear(m)
		case <-ticker.C:
			l.lie()
		case <-report.C:
			l.log.Info("lies so far", "counts", l.snapshot())
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (l *liar) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counts)
}

func (l *liar) count(kind string, n int) {
	l.mu.Lock()
	l.counts[kind] += n
	l.mu.Unlock()
}

// hear follows the others' terms and keeps their messages for replays.
func (l *liar) hear(m *nats.Msg) {
	if m.Subject == protocol.QuerySubject(l.cluster) {
		if m.Reply != "" {
			l.answer(m.Reply)
		}
		return
	}
	msg, err := protocol.Decode(m.Data)
	if err != nil || msg.From == l.id {
		return
	}
	if msg.Inc != 0 {
		l.incs[msg.From] = msg.Inc
	}
	// Only terms the honest members stand in: proposes of the designated
	// leader, and statuses and time-outs of the others.
	if msg.Term <= protocol.MaxTerm/2 && msg.Term > l.term {
		l.term = msg.Term
	}
	if msg.Type == protocol.TypeBzPropose && msg.Term == l.term {
		l.seq = msg.Seq
	}
	l.others = keep(l.others, raw{subject: m.Subject, data: m.Data, header: m.Header})
}

func keep(list []raw, r raw) []raw {
	if len(list) >= captured {
		list = slices.Delete(list, 0, 1)
	}
	return append(list, r)
}

func (l *liar) designated(t uint64) uint64 {
	if t == 0 {
		return 0
	}
	return l.desc[(t-1)%uint64(len(l.desc))]
}

// lie does this tick's lies: it equivocates in every new term (and
// again every few seconds, for members that started since), and tells
// one other lie in turn.
func (l *liar) lie() {
	t := max(l.term, 1)
	if t != l.equivTerm || time.Since(l.equivAt) > 2*time.Second {
		l.equivocate(t)
	}
	l.step++
	switch l.step % 5 {
	case 0:
		l.claimCeiling()
	case 1:
		l.randomTimeout(t)
	case 2:
		l.replay()
	case 3:
		l.splitStatuses(t)
	case 4:
		l.announce()
	}
}

// equivocate signs two votes of term t, for its designated leader and for
// a member it is not (itself, or another), and broadcasts both.
func (l *liar) equivocate(t uint64) {
	lead := l.designated(t)
	other := l.id
	if other == lead {
		other = l.desc[0]
		if other == lead {
			other = l.desc[1]
		}
	}
	seq := max(l.seq, 1)
	for _, leader := range []uint64{lead, other} {
		ss, err := certify.Sign(l.votes, certify.Vote(l.cluster, l.id, t, leader))
		if err != nil {
			l.log.Error("sign", "err", err)
			return
		}
		l.send(protocol.Message{Type: protocol.TypeBzVote, Term: t, Seq: seq, Statement: &ss})
	}
	l.equivTerm, l.equivAt = t, time.Now()
	l.count(lieEquivocation, 1)
}

// ceilingTerm is the highest term the liar is designated to lead.
func (l *liar) ceilingTerm() uint64 {
	n := uint64(len(l.desc))
	i := uint64(slices.Index(l.desc, l.id))
	// terms led by index i are ≡ i+1 (mod n)
	t := protocol.MaxTerm
	for (t-1)%n != i {
		t--
	}
	return t
}

// claimCeiling proposes itself for a term near the ceiling, with a forged
// certificate (its own vote and made-up signatures of the others) on
// every other round, and with nothing (or a forged time-out certificate)
// on the rest.
func (l *liar) claimCeiling() {
	t := l.ceilingTerm()
	l.claimRound++
	msg := protocol.Message{Type: protocol.TypeBzPropose, Term: t, Seq: l.claimRound}
	switch l.claimRound % 3 {
	case 0:
		msg.Cert = l.forgedCert(t, l.id)
		l.count(lieForgedCert, 1)
	case 1:
		msg.TC = l.forgedTC(t - 1)
		l.count(lieForgedCert, 1)
	}
	l.send(msg)
	l.count(lieCeilingClaim, 1)
}

// forgedCert is a certificate of leader in term t: its own real vote and
// random bytes for a quorum's other signatures.
func (l *liar) forgedCert(t, leader uint64) *certify.Certificate {
	c := &certify.Certificate{Cluster: l.cluster, Term: t, Leader: leader}
	for _, m := range l.quorumWithSelf() {
		c.Votes = append(c.Votes, certify.MemberSignature{Member: m, Signature: l.signatureOf(m, certify.Vote(l.cluster, m, t, leader))})
	}
	return c
}

func (l *liar) forgedTC(t uint64) *certify.TimeoutCertificate {
	c := &certify.TimeoutCertificate{Cluster: l.cluster, Term: t}
	for _, m := range l.quorumWithSelf() {
		c.Timeouts = append(c.Timeouts, certify.MemberSignature{Member: m, Signature: l.signatureOf(m, certify.Timeout(l.cluster, m, t))})
	}
	return c
}

// quorumWithSelf is a quorum of members, itself among them, ascending.
func (l *liar) quorumWithSelf() []uint64 {
	q := certify.Quorum(len(l.desc))
	ids := []uint64{l.id}
	for _, m := range l.desc {
		if len(ids) == q {
			break
		}
		if m != l.id {
			ids = append(ids, m)
		}
	}
	slices.Sort(ids)
	return ids
}

// signatureOf signs s if it is the liar's own, and makes a signature up
// otherwise.
func (l *liar) signatureOf(member uint64, s certify.Statement) []byte {
	if member == l.id {
		if ss, err := certify.Sign(l.votes, s); err == nil {
			return ss.Signature
		}
	}
	sig := make([]byte, certify.SignatureSize)
	rand.Read(sig)
	return sig
}

// randomTimeout signs and broadcasts a time-out of a random term near the
// current one.
func (l *liar) randomTimeout(t uint64) {
	x := t + uint64(l.rng.IntN(len(l.desc)))
	ss, err := certify.Sign(l.votes, certify.Timeout(l.cluster, l.id, x))
	if err != nil {
		return
	}
	l.send(protocol.Message{Type: protocol.TypeBzTimeout, Term: t, Statement: &ss})
	l.count(lieTimeout, 1)
}

// replay sends again, verbatim, one message of the others and one of its
// own that it captured.
func (l *liar) replay() {
	for _, list := range [][]raw{l.others, l.own} {
		if len(list) == 0 {
			continue
		}
		r := list[l.rng.IntN(len(list))]
		if err := l.nc.PublishMsg(&nats.Msg{Subject: r.subject, Data: r.data, Header: r.header}); err == nil {
			l.count(lieReplay, 1)
		}
	}
}

// splitStatuses tells each peer a different story: another term, another
// leader, a certificate forged for it.
func (l *liar) splitStatuses(t uint64) {
	for i, p := range l.desc {
		if p == l.id {
			continue
		}
		term := t + uint64(i) + 1
		lead := l.designated(term)
		l.send(protocol.Message{Type: protocol.TypeBzStatus, To: p, ToInc: l.incs[p], Term: term, Candidate: lead, Cert: l.forgedCert(term, lead)})
	}
	l.count(lieSplitStatuses, 1)
}

// announce publishes an announcement that names it leader of the ceiling
// term, signed with its own key, with a forged certificate.
func (l *liar) announce() {
	if l.publishAnnouncement(protocol.LeaderSubject(l.cluster)) {
		l.count(lieAnnouncement, 1)
	}
}

// answer answers a query for the leader with the forged announcement.
func (l *liar) answer(reply string) {
	if l.publishAnnouncement(reply) {
		l.count(lieQueryAnswer, 1)
	}
}

func (l *liar) publishAnnouncement(subject string) bool {
	t := l.ceilingTerm()
	a := protocol.Announcement{Cluster: l.cluster, Leader: l.id, Term: t, Algorithm: protocol.Byzantine,
		At: protocol.Timestamp{Time: time.Now()}, Certificate: l.forgedCert(t, l.id)}
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		return false
	}
	return l.nc.PublishMsg(&nats.Msg{Subject: subject, Data: data, Header: l.signer.SignAnnouncement(l.cluster, data)}) == nil
}

// send stamps, encodes, signs and publishes m as the liar's own.
func (l *liar) send(m protocol.Message) {
	m.From = l.id
	l.stamp.Apply(&m, time.Now())
	data, err := protocol.Encode(m)
	if err != nil {
		l.log.Error("encode", "type", m.Type, "err", err)
		return
	}
	subject := protocol.SubjectFor(l.cluster, m)
	r := raw{subject: subject, data: data, header: l.signer.Header(subject, data)}
	if err := l.nc.PublishMsg(&nats.Msg{Subject: r.subject, Data: r.data, Header: r.header}); err != nil {
		l.log.Warn("publish", "subject", subject, "err", err)
		return
	}
	l.own = keep(l.own, r)
}
