package certify_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// countingMembers counts the signatures checked.
type countingMembers struct {
	certify.Members
	checks int
}

func (m *countingMembers) Verify(member uint64, data, sig []byte) error {
	m.checks++
	return m.Members.Verify(member, data, sig)
}

// A certificate that held is not checked again; one of the same cluster,
// term and leader that differs in anything (a forged signature, another
// quorum) is checked in full, and a forgery is refused every time.
func TestVerifiedChecksEachCertificateOnce(t *testing.T) {
	c := newCluster(t, 4)
	keys := &countingMembers{Members: c.keys}
	v := certify.NewVerified(8)
	cert := c.certificate(t, 3, 4, 1, 2, 4)
	if err := v.VerifyCertificateFor(keys, cert, "default", 3, 4); err != nil {
		t.Fatalf("valid certificate: %v", err)
	}
	if keys.checks != 3 {
		t.Fatalf("%d signatures checked for a quorum of 3", keys.checks)
	}
	for range 5 {
		if err := v.VerifyCertificateFor(keys, cert, "default", 3, 4); err != nil {
			t.Fatalf("the same certificate again: %v", err)
		}
	}
	if keys.checks != 3 {
		t.Errorf("%d signatures checked after the same certificate 6 times, want 3", keys.checks)
	}
	// The same certificate, for another term: refused, as without a cache.
	if err := v.VerifyCertificateFor(keys, cert, "default", 4, 4); !errors.Is(err, certify.ErrCertificate) {
		t.Errorf("for another term: %v, want %v", err, certify.ErrCertificate)
	}

	forged := cert
	forged.Votes = slices.Clone(cert.Votes)
	forged.Votes[1].Signature = slices.Clone(cert.Votes[1].Signature)
	forged.Votes[1].Signature[0] ^= 1
	for i := range 2 {
		before := keys.checks
		if err := v.VerifyCertificateFor(keys, forged, "default", 3, 4); !errors.Is(err, certify.ErrSignature) {
			t.Fatalf("forged certificate of the same term and leader, try %d: %v, want %v", i+1, err, certify.ErrSignature)
		}
		if keys.checks == before {
			t.Fatalf("forged certificate, try %d: no signature checked", i+1)
		}
	}
	if v.Len() != 1 {
		t.Errorf("remembers %d certificates, want 1 (the forgery is not)", v.Len())
	}

	other := c.certificate(t, 3, 4, 2, 3, 4)
	before := keys.checks
	if err := v.VerifyCertificateFor(keys, other, "default", 3, 4); err != nil {
		t.Fatalf("another quorum's certificate: %v", err)
	}
	if keys.checks-before != 3 {
		t.Errorf("another quorum's certificate: %d signatures checked, want 3", keys.checks-before)
	}

	// The certificate that held, said to be of another member-set
	// version: checked in full, and refused.
	moved := cert
	moved.Version = 1
	before = keys.checks
	if err := v.VerifyCertificateFor(keys, moved, "default", 3, 4); !errors.Is(err, certify.ErrSignature) {
		t.Fatalf("the certificate under another version: %v, want %v", err, certify.ErrSignature)
	}
	if keys.checks == before {
		t.Errorf("the certificate under another version: no signature checked")
	}
}

// It keeps at most its size, forgetting the oldest first: a forgotten
// certificate is checked again.
func TestVerifiedIsBounded(t *testing.T) {
	c := newCluster(t, 4)
	keys := &countingMembers{Members: c.keys}
	v := certify.NewVerified(3)
	var certs []certify.Certificate
	for term := uint64(1); term <= 5; term++ {
		cert := c.certificate(t, term, 4, 1, 2, 3)
		certs = append(certs, cert)
		if err := v.VerifyCertificate(keys, cert); err != nil {
			t.Fatal(err)
		}
		if want := min(int(term), 3); v.Len() != want {
			t.Fatalf("after %d certificates: remembers %d, want %d", term, v.Len(), want)
		}
	}
	before := keys.checks
	for _, cert := range certs[2:] {
		if err := v.VerifyCertificate(keys, cert); err != nil {
			t.Fatal(err)
		}
	}
	if keys.checks != before {
		t.Errorf("the 3 latest certificates again: %d signatures checked, want none", keys.checks-before)
	}
	if err := v.VerifyCertificate(keys, certs[0]); err != nil {
		t.Fatal(err)
	}
	if keys.checks-before != 3 {
		t.Errorf("the oldest, forgotten: %d signatures checked, want 3", keys.checks-before)
	}
	if v.Len() != 3 {
		t.Errorf("remembers %d, want 3", v.Len())
	}
}
