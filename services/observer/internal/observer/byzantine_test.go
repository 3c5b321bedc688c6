package observer

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// byzantine is a byzantine cluster "default" of four members with keys.
type byzantine struct {
	signers map[uint64]*signing.Signer
	keys    *signing.MemberKeys
}

func newByzantine(t *testing.T) *byzantine {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	return &byzantine{signers: signers, keys: keys}
}

// startByzantine starts a NATS server and an observer that holds the
// keys of a byzantine cluster "default" of four members, and returns a
// connection to the server, the members' keys and the observer.
func startByzantine(t *testing.T) (*nats.Conn, *byzantine, *running) {
	t.Helper()
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	b := newByzantine(t)
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": b.keys}
	return nc, b, startObserver(t, cfg, nil)
}

// startStatedByzantine is startByzantine with the keys stating the
// cluster's algorithm, as the members files of this project do, so that
// the observer knows from its own configuration that "default" is
// byzantine. It also returns the observer's configuration.
func startStatedByzantine(t *testing.T) (*nats.Conn, *byzantine, *running, Config) {
	t.Helper()
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	b := newByzantine(t)
	keys, err := b.keys.State("default", protocol.Byzantine)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": keys}
	return nc, b, startObserver(t, cfg, nil), cfg
}

// sign has member id's key (or, with a stranger signer, a key that is not
// the member's) sign st.
func sign(t *testing.T, s *signing.Signer, st certify.Statement) certify.SignedStatement {
	t.Helper()
	cs, err := certify.NewSigner(st.Member, s.KeyPair())
	if err != nil {
		t.Fatal(err)
	}
	signed, err := certify.Sign(cs, st)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// certificate returns the certificate of leader in term, with the votes
// of voters signed by signers' keys.
func certificate(t *testing.T, signers map[uint64]*signing.Signer, term, leader uint64, voters ...uint64) *certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, id := range voters {
		votes = append(votes, sign(t, signers[id], certify.Vote("default", id, term, leader)))
	}
	c, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// publish publishes a message of from on its subject, signed by s (unsigned
// if s is nil).
func publishSigned(t *testing.T, nc *nats.Conn, subject string, data []byte, s *signing.Signer) {
	t.Helper()
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	if s != nil {
		m.Header = s.Header(subject, data)
	}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A byzantine leader is recorded only with a certificate that holds under
// the cluster's keys: a missing or forged one is refused and counted as
// bad_certificate, though the announcement is signed by the leader it
// names.
func TestByzantineLeaderNeedsACertificate(t *testing.T) {
	nc, b, o := startByzantine(t)
	strangers, _ := batontest.MemberKeys(t, 1, 2, 3, 4)

	byz := func(leader, term uint64, c *certify.Certificate) []byte {
		a := announcement("default", leader, term, t0.Add(time.Duration(term)*time.Second))
		a.Algorithm, a.Certificate = protocol.Byzantine, c
		data, err := protocol.EncodeAnnouncement(a)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	subject := protocol.LeaderSubject("default")
	publishSigned(t, nc, subject, byz(3, 5, nil), b.signers[3])
	publishSigned(t, nc, subject, byz(3, 6, certificate(t, strangers, 6, 3, 1, 2, 3)), b.signers[3])
	publishSigned(t, nc, subject, byz(3, 7, certificate(t, b.signers, 7, 3, 3, 1)), b.signers[3])
	publishSigned(t, nc, subject, byz(4, 8, certificate(t, b.signers, 8, 4, 1, 2, 3)), b.signers[4])
	o.waitFor(t, "the certified term 8", func() bool { return o.leaderships("default") == 1 })
	c, _ := o.store.Cluster("default")
	if l, ok := c.Current(); !ok || l.Term != 8 || l.Leader != 4 || l.Algorithm != protocol.Byzantine {
		t.Errorf("current leadership %+v, want node 4 in term 8 (byzantine)", l)
	}
	if got := counter(o.metrics.announcements.WithLabelValues(resultBadCertificate)); got != 3 {
		t.Errorf("announcements refused for their certificate: %v, want 3 (missing, forged, short)", got)
	}
}

// Without keys for it, no byzantine leader of a cluster is recorded.
func TestByzantineLeaderWithoutKeys(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	b := newByzantine(t)
	o := startObserver(t, testConfig(url, t.TempDir()), nil)
	a := announcement("default", 4, 8, t0)
	a.Algorithm, a.Certificate = protocol.Byzantine, certificate(t, b.signers, 8, 4, 1, 2, 3)
	announce(t, nc, a)
	announce(t, nc, announcement("other", 1, 1, t0))
	o.waitFor(t, "the other cluster", func() bool { return o.leaderships("other") == 1 })
	if got := counter(o.metrics.announcements.WithLabelValues(resultBadCertificate)); got != 1 || o.leaderships("default") != 0 {
		t.Errorf("bad_certificate %v, %d leaderships of default; want 1 and 0", got, o.leaderships("default"))
	}
}

// The observer records as faulty a member whose evidence holds, once, with
// the proof, on disk, in the API, on the page and in the metrics; it
// refuses evidence whose statements are not signed with the convicted
// member's key, evidence relayed without a member's signature, and the
// evidence of a cluster it has no keys for.
func TestEvidenceOfALie(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	b := newByzantine(t)
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": b.keys}
	o := startObserver(t, cfg, nil)

	// evidence is member's two votes in term 4, signed with s, as member
	// 2 relays them.
	evidence := func(cluster string, s *signing.Signer, member uint64) []byte {
		return relayed(t, cluster, s, member, 2)
	}
	subject := protocol.SubjectFor("default", protocol.Message{Type: protocol.TypeBzEvidence, From: 2})
	// Forged: member 4's two votes signed with a key that is not 4's,
	// relayed and signed by member 2.
	publishSigned(t, nc, subject, evidence("default", batontest.NewSigner(t, 4), 4), b.signers[2])
	// Member 3's lie, but relayed unsigned, or signed by a key not 2's.
	publishSigned(t, nc, subject, evidence("default", b.signers[3], 3), nil)
	publishSigned(t, nc, subject, evidence("default", b.signers[3], 3), batontest.NewSigner(t, 2))
	// A cluster without keys.
	other := protocol.SubjectFor("other", protocol.Message{Type: protocol.TypeBzEvidence, From: 2})
	publishSigned(t, nc, other, evidence("other", b.signers[3], 3), b.signers[2])
	o.waitFor(t, "the four refusals", func() bool {
		return counter(o.metrics.live.WithLabelValues(protocol.KindEvidence, resultBadSignature)) == 4
	})
	// Member 3's lie, proven twice.
	proof := evidence("default", b.signers[3], 3)
	publishSigned(t, nc, subject, proof, b.signers[2])
	publishSigned(t, nc, subject, relayed(t, "default", b.signers[3], 3, 1), b.signers[1])
	o.waitFor(t, "both proofs", func() bool { return o.liveCount(protocol.KindEvidence) == 2 })

	c, ok := o.store.Cluster("default")
	if !ok || len(c.Faulty) != 1 || c.Faulty[0].Member != 3 {
		t.Fatalf("faulty members %+v, want member 3 alone", c)
	}
	if got := counter(o.metrics.evidence.WithLabelValues("default")); got != 1 {
		t.Errorf("observer_evidence_recorded_total = %v, want 1", got)
	}
	if _, ok := o.store.Cluster("other"); ok {
		t.Error("the cluster without keys was recorded")
	}

	var listed []faultyJSON
	if code := o.get(t, "/api/clusters/default/faulty", &listed); code != http.StatusOK || len(listed) != 1 || listed[0].Member != 3 || listed[0].Evidence == nil {
		t.Fatalf("GET faulty = %d %+v, want member 3 with its evidence", code, listed)
	}
	if err := certify.VerifyEvidence(b.keys.Members(), *listed[0].Evidence); err != nil {
		t.Errorf("the evidence served does not hold: %v", err)
	}
	if code := o.get(t, "/api/clusters/nowhere/faulty", nil); code != http.StatusNotFound {
		t.Errorf("GET faulty of an unknown cluster = %d, want 404", code)
	}

	resp, err := http.Get("http://" + o.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// html/template writes '+' as a character reference.
	sig := strings.ReplaceAll(base64.StdEncoding.EncodeToString(c.Faulty[0].Evidence.First.Signature), "+", "&#43;")
	for _, want := range []string{"Faulty members", `data-member="3"`, "voted for two leaders in term 4", "vote of member 3 for leader 1 in term 4", sig} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	// The record survives a restart.
	o.stop()
	o = startObserver(t, cfg, nil)
	if c, _ := o.store.Cluster("default"); len(c.Faulty) != 1 || c.Faulty[0].Member != 3 {
		t.Errorf("after a restart, faulty members %+v, want member 3", c.Faulty)
	}
}

// relayed is a bz_evidence message of from with member's two votes in
// term 4 of cluster, for 1 and for 2, signed with s.
func relayed(t *testing.T, cluster string, s *signing.Signer, member, from uint64) []byte {
	t.Helper()
	e := &certify.Evidence{
		First:  sign(t, s, certify.Vote(cluster, member, 4, 1)),
		Second: sign(t, s, certify.Vote(cluster, member, 4, 2)),
	}
	data, err := protocol.Encode(protocol.Message{Type: protocol.TypeBzEvidence, From: from, Evidence: e})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A byzantine leader's round counts as its heartbeat only with the
// certificate of its own term: a round before the certificate is no
// leader's yet, and one with a forged certificate is refused.
func TestByzantineRenewalsAreHeartbeats(t *testing.T) {
	nc, b, o := startByzantine(t)
	strangers, _ := batontest.MemberKeys(t, 1, 2, 3, 4)

	a := announcement("default", 4, 8, t0)
	a.Algorithm, a.Certificate = protocol.Byzantine, certificate(t, b.signers, 8, 4, 1, 2, 3)
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	publishSigned(t, nc, protocol.LeaderSubject("default"), data, b.signers[4])
	o.waitFor(t, "the certified term 8", func() bool { return o.leaderships("default") == 1 })

	round := func(seq uint64, c *certify.Certificate) []byte {
		data, err := protocol.Encode(protocol.Message{Type: protocol.TypeBzPropose, From: 4, Term: 8, Seq: seq, Cert: c,
			Inc: 1, N: seq, TS: time.Now().UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	subject := protocol.BroadcastSubject("default", protocol.TypeBzPropose)
	publishSigned(t, nc, subject, round(1, nil), b.signers[4])
	publishSigned(t, nc, subject, round(2, certificate(t, strangers, 8, 4, 1, 2, 3)), b.signers[4])
	publishSigned(t, nc, subject, round(3, certificate(t, b.signers, 8, 4, 1, 2, 3)), b.signers[4])
	o.waitFor(t, "the certified round as a heartbeat", func() bool {
		return counter(o.metrics.live.WithLabelValues(protocol.KindHeartbeat, "ok")) == 1
	})
	if got := counter(o.metrics.live.WithLabelValues(kindBzPropose, resultBadCertificate)); got != 1 {
		t.Errorf("rounds refused for their certificate: %v, want 1 (forged)", got)
	}
	if got := o.leaderships("default"); got != 1 {
		t.Errorf("%d leaderships after the rounds, want 1", got)
	}
}

// A byzantine leader's certified renewals keep its leadership: it ends
// silent at the last one, not at its announcement (before they were
// followed, every byzantine leadership ended one window after it was
// announced). A forged renewal of another member in the same term, and a
// candidacy, count for no one: no split brain.
func TestByzantineLeaderSilentAtItsLastRenewal(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	b := newByzantine(t)
	strangers, _ := batontest.MemberKeys(t, 1, 2, 3, 4)
	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": b.keys}
	// On the test's clock; the observer looks for silence every half of
	// it in real time.
	cfg.LeaderTimeout = time.Second
	clock := &fakeClock{now: t0}
	o := startObserver(t, cfg, clock)

	cert := certificate(t, b.signers, 8, 4, 1, 2, 3)
	a := announcement("default", 4, 8, t0)
	a.Algorithm, a.Certificate = protocol.Byzantine, cert
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	publishSigned(t, nc, protocol.LeaderSubject("default"), data, b.signers[4])
	o.waitFor(t, "term 8", func() bool { return o.leaderships("default") == 1 })

	propose := func(from, term uint64, c *certify.Certificate) {
		t.Helper()
		m := protocol.Message{Type: protocol.TypeBzPropose, From: from, Term: term, Seq: 1, Cert: c}
		data, err := protocol.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		publishSigned(t, nc, protocol.SubjectFor("default", m), data, b.signers[from])
	}
	heartbeats := o.metrics.live.WithLabelValues(protocol.KindHeartbeat, "ok")
	renewed := t0.Add(800 * time.Millisecond)
	clock.Set(renewed)
	propose(4, 8, cert)
	o.waitFor(t, "4's renewal", func() bool { return counter(heartbeats) == 1 })
	propose(3, 9, nil)                                      // a candidacy
	propose(3, 8, certificate(t, strangers, 8, 3, 1, 2, 3)) // a second leader of term 8, forged
	bad := o.metrics.live.WithLabelValues(kindBzPropose, resultBadCertificate)
	o.waitFor(t, "the forged renewal", func() bool { return counter(bad) == 1 })
	if got := counter(heartbeats); got != 1 {
		t.Errorf("renewals taken as heartbeats: %v, want 1 (the candidacy and the forged one are not)", got)
	}

	// 4 falls silent: within the window of its renewal the leadership
	// lasts; beyond it, it ends silent at the renewal.
	clock.Set(renewed.Add(2 * time.Second))
	o.waitFor(t, "term 8 to end", func() bool { l, _ := o.store.Latest("default"); return l.Ended() })
	var hist []leadershipJSON
	o.get(t, "/api/clusters/default/history", &hist)
	if len(hist) != 1 {
		t.Fatalf("history = %v, want term 8 alone", hist)
	}
	if r := hist[0].EndReason; r == nil || *r != history.EndSilent || hist[0].EndedAt == nil || !hist[0].EndedAt.Equal(renewed) {
		t.Errorf("term 8 ended %v at %v, want silent at its renewal %v", r, hist[0].EndedAt, renewed)
	}
	if c, _ := o.store.Cluster("default"); len(c.SplitBrains) != 0 || hist[0].SplitBrain {
		t.Errorf("split brains %v: the forged renewal of 3 counted", c.SplitBrains)
	}
}

// A byzantine leader's every round carries the same certificate: the
// observer remembers it once it held, instead of checking its quorum's
// signatures on every round, and still refuses a certificate of the same
// term and leader whose signatures do not hold.
func TestRenewalCertificateRemembered(t *testing.T) {
	b := newByzantine(t)
	cfg := testConfig("nats://127.0.0.1:4222", t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"default": b.keys}
	o := New(cfg, testLogger())
	cert := certificate(t, b.signers, 3, 4, 1, 2, 4)
	round := protocol.Message{Type: protocol.TypeBzPropose, From: 4, Term: 3, Seq: 1, Cert: cert}
	for seq := uint64(1); seq <= 3; seq++ {
		round.Seq = seq
		if err := o.checkRenewal("default", round); err != nil {
			t.Fatalf("round %d: %v", seq, err)
		}
	}
	if got := o.verified["default"].Len(); got != 1 {
		t.Errorf("certificates remembered after 3 rounds with one: %d, want 1", got)
	}
	forged := *cert
	forged.Votes = slices.Clone(cert.Votes)
	sig := slices.Clone(forged.Votes[0].Signature)
	sig[0] ^= 1
	forged.Votes[0].Signature = sig
	round.Cert = &forged
	if err := o.checkRenewal("default", round); !errors.Is(err, protocol.ErrUncertified) {
		t.Errorf("a round with the certificate's signature altered: %v, want %v", err, protocol.ErrUncertified)
	}
}
