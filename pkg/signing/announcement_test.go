package signing

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// cluster is n members with keys, 1 to n, and their statement signers.
type cluster struct {
	signers  map[uint64]*Signer
	certify  map[uint64]*certify.KeySigner
	keys     *MemberKeys
	n        int
	announce time.Time
}

func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{signers: map[uint64]*Signer{}, certify: map[uint64]*certify.KeySigner{}, n: n,
		announce: time.Date(2026, 11, 21, 22, 0, 0, 123456789, time.UTC)}
	var all []*Signer
	for id := uint64(1); id <= uint64(n); id++ {
		s := testSigner(t, id)
		cs, err := certify.NewSigner(id, s.KeyPair())
		if err != nil {
			t.Fatal(err)
		}
		c.signers[id], c.certify[id] = s, cs
		all = append(all, s)
	}
	c.keys = testKeys(t, all...)
	return c
}

// cert returns the certificate of leader in term of "c" signed by voters.
func (c *cluster) cert(t testing.TB, term, leader uint64, voters ...uint64) *certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, id := range voters {
		v, err := certify.Sign(c.certify[id], certify.Vote("c", id, term, leader))
		if err != nil {
			t.Fatal(err)
		}
		votes = append(votes, v)
	}
	cert, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}

// quorum returns the first Quorum(n) members.
func (c *cluster) quorum() []uint64 {
	var ids []uint64
	for id := uint64(1); id <= uint64(certify.Quorum(c.n)); id++ {
		ids = append(ids, id)
	}
	return ids
}

func (c *cluster) announcement(term, leader uint64, cert *certify.Certificate) protocol.Announcement {
	return protocol.Announcement{Cluster: "c", Leader: leader, Term: term, Algorithm: protocol.Byzantine, At: protocol.Timestamp{Time: c.announce}, Certificate: cert}
}

func TestAnnouncementCertificateRoundTrip(t *testing.T) {
	c := newCluster(t, 4)
	a := c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"certificate":{"cluster":"c","term":7,"leader":4,"votes":[{"member":1,`)) {
		t.Errorf("encoding %s lacks the certificate", data)
	}
	got, err := protocol.DecodeAnnouncement(data)
	if err != nil {
		t.Fatalf("DecodeAnnouncement: %v", err)
	}
	if err := VerifyAnnouncement(c.keys, got); err != nil {
		t.Errorf("VerifyAnnouncement(valid) = %v, want nil", err)
	}
	// The other algorithms' announcements encode as before.
	ring := protocol.Announcement{Cluster: "c", Leader: 4, Term: 7, Algorithm: protocol.Ring, At: protocol.Timestamp{Time: c.announce}}
	data, _ = protocol.EncodeAnnouncement(ring)
	if want := `{"cluster":"c","leader":4,"term":7,"algorithm":"ring","at":"2026-11-21T22:00:00.123456789Z"}`; string(data) != want {
		t.Errorf("ring announcement = %s, want %s", data, want)
	}
}

// At 101 members (f = 33) a certificate holds a quorum of 68 votes: the
// announcement exceeds protocol.MaxPayload, and fits protocol.MaxAnnouncement with room.
func TestAnnouncementOf101Members(t *testing.T) {
	c := newCluster(t, 101)
	if q := certify.Quorum(101); q != 68 {
		t.Fatalf("Quorum(101) = %d, want 68", q)
	}
	a := c.announcement(protocol.MaxTerm, 101, c.cert(t, protocol.MaxTerm, 101, c.quorum()...))
	data, err := protocol.EncodeAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("announcement of 101 members: %d bytes", len(data))
	if len(data) <= protocol.MaxPayload || len(data) > protocol.MaxAnnouncement/2 {
		t.Errorf("announcement of %d bytes, want above protocol.MaxPayload %d and below half of protocol.MaxAnnouncement %d", len(data), protocol.MaxPayload, protocol.MaxAnnouncement)
	}
	got, err := protocol.DecodeAnnouncement(data)
	if err != nil {
		t.Fatalf("DecodeAnnouncement(%d bytes): %v", len(data), err)
	}
	if err := VerifyAnnouncement(c.keys, got); err != nil {
		t.Errorf("VerifyAnnouncement: %v", err)
	}
}

func TestDecodeAnnouncementCertificateShape(t *testing.T) {
	c := newCluster(t, 4)
	at := `"at":"2026-11-21T22:00:00Z"`
	cert := func(cl string, term, leader uint64) string {
		cc := c.cert(t, term, leader, 1, 2, 3)
		cc.Cluster = cl
		b, err := cc.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name string
		data string
		want error
	}{
		{"byzantine without certificate", `{"cluster":"c","leader":4,"term":7,"algorithm":"byzantine",` + at + `}`, protocol.ErrUncertified},
		{"byzantine with a null certificate", `{"cluster":"c","leader":4,"term":7,"algorithm":"byzantine",` + at + `,"certificate":null}`, protocol.ErrUncertified},
		{"certificate of another term", `{"cluster":"c","leader":4,"term":8,"algorithm":"byzantine",` + at + `,"certificate":` + cert("c", 7, 4) + `}`, protocol.ErrUncertified},
		{"certificate of another leader", `{"cluster":"c","leader":3,"term":7,"algorithm":"byzantine",` + at + `,"certificate":` + cert("c", 7, 4) + `}`, protocol.ErrUncertified},
		{"certificate of another cluster", `{"cluster":"c","leader":4,"term":7,"algorithm":"byzantine",` + at + `,"certificate":` + cert("d", 7, 4) + `}`, protocol.ErrUncertified},
		{"certificate without votes", `{"cluster":"c","leader":4,"term":7,"algorithm":"byzantine",` + at + `,"certificate":{"cluster":"c","term":7,"leader":4,"votes":[]}}`, certify.ErrCertificate},
		{"certificate with an unknown field", `{"cluster":"c","leader":4,"term":7,"algorithm":"byzantine",` + at + `,"certificate":{"cluster":"c","term":7,"leader":4,"votes":[],"x":1}}`, certify.ErrCertificate},
		{"long without a certificate", `{"cluster":"c","leader":4,"term":7,"algorithm":"ring",` + at + `,"pad":"` + strings.Repeat("x", protocol.MaxPayload) + `"}`, protocol.ErrAnnouncement},
		{"over protocol.MaxAnnouncement", `{"cluster":"c","leader":4,"term":7,"algorithm":"byzantine",` + at + `,"pad":"` + strings.Repeat("x", protocol.MaxAnnouncement) + `"}`, protocol.ErrAnnouncement},
	}
	for _, tc := range tests {
		_, err := protocol.DecodeAnnouncement([]byte(tc.data))
		if !errors.Is(err, protocol.ErrAnnouncement) || !errors.Is(err, tc.want) {
			t.Errorf("%s: protocol.DecodeAnnouncement = %v, want protocol.ErrAnnouncement and %v", tc.name, err, tc.want)
		}
	}
	// Fields unknown to this version are still ignored.
	if _, err := protocol.DecodeAnnouncement([]byte(`{"cluster":"c","leader":4,"term":7,"algorithm":"ring",` + at + `,"later":{"x":1}}`)); err != nil {
		t.Errorf("unknown field: %v", err)
	}
}

func TestVerifyAnnouncement(t *testing.T) {
	c := newCluster(t, 4)
	other := newCluster(t, 4) // the same IDs, other keys
	valid := c.cert(t, 7, 4, 1, 2, 3)
	forged := other.cert(t, 7, 4, 1, 2, 3)
	// One vote signed by a key that is not the member's.
	mixed := c.cert(t, 7, 4, 1, 2, 3)
	mixed.Votes[1].Signature = forged.Votes[1].Signature
	// Member 2's vote for 4 in term 6 placed in a certificate of term 7.
	replayed := c.cert(t, 7, 4, 1, 2, 3)
	replayed.Votes[1].Signature = c.cert(t, 6, 4, 2).Votes[0].Signature
	short := c.cert(t, 7, 4, 1, 2)
	outsider := c.cert(t, 7, 4, 1, 2, 3)
	outsider.Votes = append(outsider.Votes, certify.MemberSignature{Member: 9, Signature: valid.Votes[0].Signature})

	if err := VerifyAnnouncement(c.keys, c.announcement(7, 4, valid)); err != nil {
		t.Errorf("valid: %v", err)
	}
	for _, tc := range []struct {
		name string
		a    protocol.Announcement
		want error
	}{
		{"missing", c.announcement(7, 4, nil), protocol.ErrUncertified},
		{"forged", c.announcement(7, 4, forged), certify.ErrSignature},
		{"one vote forged", c.announcement(7, 4, mixed), certify.ErrSignature},
		{"a vote of another term", c.announcement(7, 4, replayed), certify.ErrSignature},
		{"short of a quorum", c.announcement(7, 4, short), certify.ErrCertificate},
		{"a signer who is not a member", c.announcement(7, 4, outsider), certify.ErrCertificate},
		{"wrong term", c.announcement(8, 4, valid), protocol.ErrUncertified},
		{"wrong leader", c.announcement(7, 3, valid), protocol.ErrUncertified},
	} {
		err := VerifyAnnouncement(c.keys, tc.a)
		if !errors.Is(err, protocol.ErrAnnouncement) || !errors.Is(err, tc.want) {
			t.Errorf("%s: VerifyAnnouncement = %v, want protocol.ErrAnnouncement and %v", tc.name, err, tc.want)
		}
	}
	if err := VerifyAnnouncement(nil, c.announcement(7, 4, valid)); !errors.Is(err, protocol.ErrNeedKeys) {
		t.Errorf("no keys: VerifyAnnouncement = %v, want protocol.ErrNeedKeys", err)
	}
	ring := protocol.Announcement{Cluster: "c", Leader: 4, Term: 7, Algorithm: protocol.Ring, At: protocol.Timestamp{Time: c.announce}}
	ringKeys, err := c.keys.State("c", protocol.Ring)
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range []*MemberKeys{nil, ringKeys} {
		if err := VerifyAnnouncement(keys, ring); err != nil {
			t.Errorf("ring announcement, keys %v: %v, want nil", keys != nil, err)
		}
	}
	if err := VerifyAnnouncement(c.keys, ring); !errors.Is(err, protocol.ErrNoAlgorithm) {
		t.Errorf("ring announcement, keys stating no algorithm: %v, want protocol.ErrNoAlgorithm", err)
	}
	ring.Certificate = forged
	if err := VerifyAnnouncement(ringKeys, ring); !errors.Is(err, certify.ErrSignature) {
		t.Errorf("ring announcement with a forged certificate: %v, want certify.ErrSignature", err)
	}
}

func TestReadByzantineAnnouncement(t *testing.T) {
	c := newCluster(t, 4)
	read := func(keys *MemberKeys, a protocol.Announcement) error {
		data, err := protocol.EncodeAnnouncement(a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ReadAnnouncement(keys, "c", data, c.signers[a.Leader].SignAnnouncement("c", data))
		return err
	}
	if err := read(c.keys, c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))); err != nil {
		t.Errorf("signed and certified: %v", err)
	}
	if err := read(nil, c.announcement(7, 4, c.cert(t, 7, 4, 1, 2, 3))); !errors.Is(err, protocol.ErrNeedKeys) {
		t.Errorf("without keys: %v, want protocol.ErrNeedKeys", err)
	}
	// Signed by the leader it names, but certified by too few.
	if err := read(c.keys, c.announcement(7, 4, c.cert(t, 7, 4, 4, 1))); !errors.Is(err, protocol.ErrUncertified) {
		t.Errorf("short certificate: %v, want protocol.ErrUncertified", err)
	}
}

func TestMembersOfKeys(t *testing.T) {
	c := newCluster(t, 4)
	m := c.keys.Members()
	if m.Size() != 4 || !m.Has(4) || m.Has(5) {
		t.Errorf("Members: size %d, has 4 %t, has 5 %t; want 4, true, false", m.Size(), m.Has(4), m.Has(5))
	}
	vote, err := certify.Sign(c.certify[2], certify.Vote("c", 2, 7, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := vote.Verify(m); err != nil {
		t.Errorf("member 2's vote: %v", err)
	}
	vote.Statement.Member = 3
	if err := vote.Verify(m); !errors.Is(err, certify.ErrSignature) {
		t.Errorf("member 2's signature as 3's: %v, want certify.ErrSignature", err)
	}
	vote.Statement.Member = 9
	if err := vote.Verify(m); !errors.Is(err, certify.ErrUnknownMember) {
		t.Errorf("a non-member: %v, want certify.ErrUnknownMember", err)
	}
	var none *MemberKeys
	if none.Members().Size() != 0 || none.Members().Has(1) {
		t.Error("nil keys have members")
	}
}
