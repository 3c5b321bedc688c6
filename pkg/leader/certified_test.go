package leader_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// byzCluster is a byzantine cluster "default" of four members with keys
// (f = 1, a quorum of 3).
type byzCluster struct {
	signers map[uint64]*signing.Signer
	keys    *signing.MemberKeys
}

func newByzCluster(t *testing.T) *byzCluster {
	signers, keys := batontest.MemberKeys(t, 1, 2, 3, 4)
	return &byzCluster{signers: signers, keys: keys}
}

// cert returns the certificate of leader in term of cluster, signed by
// voters with the keys of signers.
func cert(t *testing.T, signers map[uint64]*signing.Signer, cluster string, term, leader uint64, voters ...uint64) *certify.Certificate {
	t.Helper()
	var votes []certify.SignedStatement
	for _, id := range voters {
		s, err := certify.NewSigner(id, signers[id].KeyPair())
		if err != nil {
			t.Fatal(err)
		}
		v, err := certify.Sign(s, certify.Vote(cluster, id, term, leader))
		if err != nil {
			t.Fatal(err)
		}
		votes = append(votes, v)
	}
	c, err := certify.NewCertificate(votes)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func byzAnn(leader, term uint64, c *certify.Certificate) protocol.Announcement {
	a := ann(leader, term)
	a.Algorithm, a.Certificate = protocol.Byzantine, c
	return a
}

// msg returns a as its leader signs it.
func (c *byzCluster) msg(a protocol.Announcement) *nats.Msg { return signed(a, c.signers[a.Leader]) }

// With WithKeys, a byzantine leader counts only with a certificate that
// holds under the members' keys, on the query, the stream and the leader
// subject; forged, short, other-term and missing certificates are dropped
// and reported, though each announcement is signed by the leader it names.
func TestByzantineLeaderNeedsAValidCertificate(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	c := newByzCluster(t)
	strangers, _ := batontest.MemberKeys(t, 1, 2, 3, 4) // the same IDs, other keys
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	valid := byzAnn(4, 5, cert(t, c.signers, "default", 5, 4, 1, 2, 3))
	respondMsg(t, batontest.Connect(t, url), c.msg(valid))
	got, err := leader.Current(ctx, nc, "default", leader.WithKeys(c.keys), leader.WithAlgorithm(protocol.Byzantine), leader.WithoutStream())
	if err != nil || got.Term != 5 || got.Certificate == nil {
		t.Fatalf("Current = %+v, %v; want term 5 with its certificate", got, err)
	}

	var mu sync.Mutex
	var rejected []error
	w := watch(t, nc, "default", leader.WithKeys(c.keys), leader.WithAlgorithm(protocol.Byzantine), leader.WithoutStream(), leader.WithRejected(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		rejected = append(rejected, err)
	}))
	if got := w.next(t); got.Term != 5 {
		t.Fatalf("Watch first = %+v, want term 5", got)
	}
	forged := []protocol.Announcement{
		byzAnn(3, 6, cert(t, strangers, "default", 6, 3, 1, 2, 3)), // votes signed by keys of no member
		byzAnn(3, 7, cert(t, c.signers, "default", 7, 3, 3, 1)),    // two votes: short of a quorum
		byzAnn(3, 8, cert(t, c.signers, "default", 6, 3, 1, 2, 3)), // the certificate of term 6 for term 8
		byzAnn(3, 9, nil), // no certificate
		byzAnn(3, 10, cert(t, c.signers, "other", 10, 3, 1, 2, 3)),      // another cluster's certificate
		byzAnn(3, 11, cert(t, c.signers, "default", 11, 2, 1, 2, 3)),    // the certificate of another leader
		byzAnn(3, 12, cert(t, c.signers, "default", 12, 3, 1, 2, 3, 4)), // all four: valid
	}
	publisher := batontest.Connect(t, url)
	for _, a := range forged {
		if err := publisher.PublishMsg(c.msg(a)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.next(t); got.Term != 12 {
		t.Errorf("Watch after the forgeries = %+v, want term 12", got)
	}
	mu.Lock()
	uncertified := 0
	for _, err := range rejected {
		if errors.Is(err, protocol.ErrUncertified) {
			uncertified++
		}
	}
	mu.Unlock()
	if uncertified < 6 {
		t.Errorf("rejections reported: %v, want the 6 uncertified announcements", rejected)
	}

	// The stream's last announcement, certified with forged votes, is
	// refused too.
	js := batontest.LeaderStream(t, nc)
	if _, err := js.PublishMsg(ctx, c.msg(forged[0])); err != nil {
		t.Fatal(err)
	}
	if a, err := leader.LastAnnounced(ctx, nc, "default", leader.WithKeys(c.keys), leader.WithAlgorithm(protocol.Byzantine)); !errors.Is(err, protocol.ErrUncertified) {
		t.Errorf("LastAnnounced(forged) = %+v, %v; want ErrUncertified", a, err)
	}
}

// Without keys, a byzantine announcement is never believed: Current says
// why instead of naming the leader, and Watch yields the error and ends.
func TestByzantineLeaderWithoutKeys(t *testing.T) {
	url := batontest.StartNATS(t)
	nc := batontest.Connect(t, url)
	c := newByzCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	valid := byzAnn(4, 5, cert(t, c.signers, "default", 5, 4, 1, 2, 3))
	respondMsg(t, batontest.Connect(t, url), c.msg(valid))

	a, err := leader.Current(ctx, nc, "default", leader.WithoutStream())
	if !errors.Is(err, leader.ErrNeedKeys) || errors.Is(err, leader.ErrNoLeader) {
		t.Errorf("Current without keys = %+v, %v; want ErrNeedKeys", a, err)
	}

	done := make(chan error, 1)
	go func() {
		for a, err := range leader.Watch(ctx, nc, "default", leader.WithoutStream(), leader.WithResync(0)) {
			if err == nil {
				done <- fmt.Errorf("Watch yielded the leader %+v", a)
				return
			}
			done <- err
			return
		}
		done <- errors.New("Watch ended without an error")
	}()
	select {
	case err := <-done:
		if !errors.Is(err, leader.ErrNeedKeys) {
			t.Errorf("Watch without keys yielded %v, want ErrNeedKeys", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Watch without keys yielded nothing")
	}
}

// prove returns leader's proof, signed with the key of signer, of write
// in term with the certificate c (as ProveWrite makes it, but with any
// signer, as a liar would).
func prove(t *testing.T, signer *signing.Signer, c *certify.Certificate, write []byte) leader.WriteProof {
	t.Helper()
	sig, err := certify.SignWrite(signer.Certify(), certify.WriteOf(c.Cluster, c.Term, signer.ID(), write))
	if err != nil {
		t.Fatal(err)
	}
	return leader.WriteProof{Certificate: c, Signature: sig}
}

// A certified fence admits a write only from the certified leader of a
// term not older than the last: with the certificate and the leader's own
// signature of that write.
func TestCertifiedFence(t *testing.T) {
	c := newByzCluster(t)
	strangers, _ := batontest.MemberKeys(t, 1, 2, 3, 4)
	f := leader.NewCertifiedFence("default", c.keys)
	write := []byte(`{"key":"k","value":"v5"}`)
	term5 := byzAnn(4, 5, cert(t, c.signers, "default", 5, 4, 1, 2, 3))
	p, err := leader.ProveWrite(c.signers[4], term5, write)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AdmitCertified(p, write); err != nil {
		t.Fatalf("AdmitCertified(leader 4's write in term 5) = %v", err)
	}
	with := func(c *certify.Certificate, signer *signing.Signer) leader.WriteProof {
		return prove(t, signer, c, write)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"a term alone", f.Admit(9), leader.ErrUncertified},
		{"no certificate", f.AdmitCertified(leader.WriteProof{Signature: p.Signature}, write), leader.ErrUncertified},
		{"forged votes", f.AdmitCertified(with(cert(t, strangers, "default", 9, 3, 1, 2, 3), c.signers[3]), write), certify.ErrSignature},
		{"short of a quorum", f.AdmitCertified(with(cert(t, c.signers, "default", 9, 3, 3, 1), c.signers[3]), write), certify.ErrCertificate},
		{"another cluster", f.AdmitCertified(with(cert(t, c.signers, "other", 9, 3, 1, 2, 3), c.signers[3]), write), leader.ErrUncertified},
		{"an older certified term", f.AdmitCertified(with(cert(t, c.signers, "default", 4, 2, 1, 2, 3), c.signers[2]), write), leader.ErrStaleTerm},
		// Member 3 holds leader 4's public certificate of term 5 and signs
		// with its own key: it is not the leader.
		{"another member with the leader's certificate", f.AdmitCertified(with(p.Certificate, c.signers[3]), write), certify.ErrSignature},
		// ... nor can it sign as the leader without its seed.
		{"a stranger's key as the leader's", f.AdmitCertified(with(p.Certificate, strangers[4]), write), certify.ErrSignature},
		// The leader's proof of one write does not admit another.
		{"the proof of another write", f.AdmitCertified(p, []byte(`{"key":"k","value":"liar"}`)), certify.ErrSignature},
		{"no signature", f.AdmitCertified(leader.WriteProof{Certificate: p.Certificate}, write), certify.ErrSignature},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if f.Term() != 5 {
		t.Errorf("Term = %d after the refusals, want 5", f.Term())
	}
	term6 := byzAnn(2, 6, cert(t, c.signers, "default", 6, 2, 2, 3, 4))
	p6, err := leader.ProveWrite(c.signers[2], term6, write)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AdmitCertified(p6, write); err != nil || f.Term() != 6 {
		t.Errorf("AdmitCertified(leader 2's write in term 6) = %v, Term %d; want nil, 6", err, f.Term())
	}
	var plain leader.Fence
	if err := plain.AdmitCertified(p6, write); !errors.Is(err, leader.ErrNeedKeys) {
		t.Errorf("plain fence: AdmitCertified = %v, want ErrNeedKeys", err)
	}
}

// ProveWrite signs only for the leader the certified announcement names.
func TestProveWriteRefusesAnotherMember(t *testing.T) {
	c := newByzCluster(t)
	a := byzAnn(4, 5, cert(t, c.signers, "default", 5, 4, 1, 2, 3))
	if _, err := leader.ProveWrite(c.signers[3], a, []byte("w")); err == nil {
		t.Error("member 3 proving leader 4's write: nil error, want a refusal")
	}
	if _, err := leader.ProveWrite(c.signers[4], byzAnn(4, 5, nil), []byte("w")); !errors.Is(err, leader.ErrUncertified) {
		t.Errorf("an announcement without a certificate: %v, want ErrUncertified", err)
	}
	if _, err := leader.ProveWrite(c.signers[4], byzAnn(4, 6, a.Certificate), []byte("w")); !errors.Is(err, leader.ErrUncertified) {
		t.Errorf("the certificate of another term: %v, want ErrUncertified", err)
	}
}
