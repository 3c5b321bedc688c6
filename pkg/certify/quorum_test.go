package certify_test

import (
	"bytes"
	"encoding/hex"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// statementOf returns member's accept or commit of version with digest,
// proposed in term of "default".
func statementOf(kind certify.Kind, member, term, version uint64, digest [certify.DigestSize]byte) certify.Statement {
	if kind == certify.KindCommit {
		return certify.Commit("default", member, term, version, digest)
	}
	return certify.Accept("default", member, term, version, digest)
}

// quorum signs the accepts or commits of members of version with digest,
// proposed in term of "default".
func (c cluster) quorum(t testing.TB, kind certify.Kind, term, version uint64, digest [certify.DigestSize]byte, members ...uint64) certify.QuorumCertificate {
	t.Helper()
	var signed []certify.SignedStatement
	for _, m := range members {
		signed = append(signed, c.sign(t, statementOf(kind, m, term, version, digest)))
	}
	qc, err := certify.NewQuorumCertificate(signed)
	if err != nil {
		t.Fatal(err)
	}
	return qc
}

func TestQuorumCertificate(t *testing.T) {
	c := newCluster(t, 4) // quorum 3
	digest := certify.Digest([]byte("version 3"))
	for _, kind := range []certify.Kind{certify.KindAccept, certify.KindCommit} {
		qc := c.quorum(t, kind, 7, 3, digest, 3, 1, 2)
		if err := certify.VerifyQuorumCertificate(c.keys, qc); err != nil {
			t.Fatalf("a quorum of %ss: %v", kind, err)
		}
		if got := []uint64{qc.Sigs[0].Member, qc.Sigs[1].Member, qc.Sigs[2].Member}; !reflect.DeepEqual(got, []uint64{1, 2, 3}) {
			t.Errorf("%ss in order %v, want [1 2 3]", kind, got)
		}
		if got, want := qc.Statement(2), statementOf(kind, 2, 7, 3, digest); !reflect.DeepEqual(got, want) {
			t.Errorf("Statement(2): got %+v, want %+v", got, want)
		}
		if err := certify.VerifyQuorumCertificate(c.keys, c.quorum(t, kind, 7, 3, digest, 1, 2, 3, 4)); err != nil {
			t.Errorf("all four %ss: %v", kind, err)
		}
	}

	five := newCluster(t, 5)
	accepts := func(members ...uint64) func() certify.QuorumCertificate {
		return func() certify.QuorumCertificate { return c.quorum(t, certify.KindAccept, 7, 3, digest, members...) }
	}
	altered := func(alter func(*certify.QuorumCertificate)) func() certify.QuorumCertificate {
		return func() certify.QuorumCertificate {
			qc := c.quorum(t, certify.KindAccept, 7, 3, digest, 1, 2, 3)
			qc.Sigs = append([]certify.MemberSignature(nil), qc.Sigs...)
			alter(&qc)
			return qc
		}
	}
	for _, tc := range []struct {
		name   string
		qc     func() certify.QuorumCertificate
		target error
		want   string
	}{
		{"one short", accepts(1, 2), certify.ErrCertificate, "2 accepts, a quorum of 4 members is 3"},
		{"a signer not a member", func() certify.QuorumCertificate {
			return five.quorum(t, certify.KindAccept, 7, 3, digest, 1, 2, 5)
		}, certify.ErrUnknownMember, "signer"},
		{"more signers than members", func() certify.QuorumCertificate {
			return five.quorum(t, certify.KindAccept, 7, 3, digest, 1, 2, 3, 4, 5)
		}, certify.ErrCertificate, "5 accepts among 4 members"},
		{"a bad signature", altered(func(qc *certify.QuorumCertificate) {
			qc.Sigs[1].Signature = bytes.Clone(qc.Sigs[1].Signature)
			qc.Sigs[1].Signature[5] ^= 1
		}), certify.ErrSignature, "member 2"},
		{"another member's signature", altered(func(qc *certify.QuorumCertificate) { qc.Sigs[2].Member = 4 }), certify.ErrSignature, "member 4"},
		{"twice", altered(func(qc *certify.QuorumCertificate) { qc.Sigs = append(qc.Sigs, qc.Sigs[0]) }), certify.ErrCertificate, "member 1 signs twice"},
		{"accepts as commits", altered(func(qc *certify.QuorumCertificate) { qc.Kind = certify.KindCommit }), certify.ErrSignature, "commit of version 3"},
		{"another version", altered(func(qc *certify.QuorumCertificate) { qc.Version = 4 }), certify.ErrSignature, "accept of version 4"},
		{"another term", altered(func(qc *certify.QuorumCertificate) { qc.Term = 8 }), certify.ErrSignature, "in term 8"},
		{"another digest", altered(func(qc *certify.QuorumCertificate) { qc.Digest = certify.Digest([]byte("version 4")) }), certify.ErrSignature, "member 1"},
		{"another cluster", altered(func(qc *certify.QuorumCertificate) { qc.Cluster = "other" }), certify.ErrSignature, "member 1"},
		{"a vote kind", altered(func(qc *certify.QuorumCertificate) { qc.Kind = certify.KindVote }), certify.ErrCertificate, "kind vote, want accept or commit"},
		{"bad cluster", altered(func(qc *certify.QuorumCertificate) { qc.Cluster = "a b" }), certify.ErrCertificate, "cluster name"},
		{"term 0", altered(func(qc *certify.QuorumCertificate) { qc.Term = 0 }), certify.ErrCertificate, "term 0"},
		{"version 0", altered(func(qc *certify.QuorumCertificate) { qc.Version = 0 }), certify.ErrCertificate, "version 0"},
		{"zero digest", altered(func(qc *certify.QuorumCertificate) { qc.Digest = [certify.DigestSize]byte{} }), certify.ErrCertificate, "zero digest"},
		{"no signatures", altered(func(qc *certify.QuorumCertificate) { qc.Sigs = nil }), certify.ErrCertificate, "0 accepts"},
		{"short signature", altered(func(qc *certify.QuorumCertificate) { qc.Sigs[0].Signature = qc.Sigs[0].Signature[:9] }), certify.ErrCertificate, "9 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := certify.VerifyQuorumCertificate(c.keys, tc.qc())
			wantErr(t, err, certify.ErrCertificate, tc.want)
			wantErr(t, err, tc.target)
		})
	}
	err := certify.VerifyQuorumCertificate(&certify.Keys{}, accepts(1, 2, 3)())
	wantErr(t, err, certify.ErrCertificate, "0 members")
}

func TestNewQuorumCertificateRefuses(t *testing.T) {
	c := newCluster(t, 4)
	d3, d4 := certify.Digest([]byte("version 3")), certify.Digest([]byte("other version 3"))
	accept := func(m, term, version uint64, digest [certify.DigestSize]byte) certify.SignedStatement {
		return c.sign(t, certify.Accept("default", m, term, version, digest))
	}
	commit := func(m uint64) certify.SignedStatement { return c.sign(t, certify.Commit("default", m, 7, 3, d3)) }
	for _, tc := range []struct {
		name string
		in   []certify.SignedStatement
		want string
	}{
		{"none", nil, "0 accepts or commits"},
		{"votes", []certify.SignedStatement{c.sign(t, certify.Vote("default", 1, 7, 4))}, "a vote of member 1, not an accept or a commit"},
		{"a commit among accepts", []certify.SignedStatement{accept(1, 7, 3, d3), commit(2)}, "a commit of member 2 among the accepts"},
		{"an accept among commits", []certify.SignedStatement{commit(1), accept(2, 7, 3, d3)}, "an accept of member 2 among the commits"},
		{"a vote among accepts", []certify.SignedStatement{accept(1, 7, 3, d3), c.sign(t, certify.Vote("default", 2, 7, 4))}, "a vote of member 2 among the accepts"},
		{"two versions", []certify.SignedStatement{accept(1, 7, 3, d3), accept(2, 7, 4, d3)}, "member 2 accepts version 4 of term 7 of \"default\", not version 3"},
		{"two terms", []certify.SignedStatement{accept(1, 7, 3, d3), accept(2, 8, 3, d3)}, "member 2 accepts version 3 of term 8"},
		{"two digests", []certify.SignedStatement{accept(1, 7, 3, d3), accept(2, 7, 3, d4)}, "member 2 accepts another set as version 3"},
		{"two clusters", []certify.SignedStatement{accept(1, 7, 3, d3), c.sign(t, certify.Accept("other", 2, 7, 3, d3))}, `of "other", not`},
		{"twice", []certify.SignedStatement{commit(1), commit(1)}, "member 1 signs twice"},
		{"invalid", []certify.SignedStatement{{Statement: certify.Accept("default", 1, 7, 0, d3)}}, "version 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.NewQuorumCertificate(tc.in)
			wantErr(t, err, certify.ErrCertificate, tc.want)
		})
	}
	_, err := certify.NewQuorumCertificate([]certify.SignedStatement{commit(1), c.sign(t, certify.Commit("default", 2, 7, 3, d4))})
	wantErr(t, err, certify.ErrCertificate, "member 2 commits to another set as version 3")
}

func TestQuorumCertificateJSON(t *testing.T) {
	c := newCluster(t, 4)
	digest := certify.Digest([]byte("version 3"))
	for _, kind := range []certify.Kind{certify.KindAccept, certify.KindCommit} {
		qc := c.quorum(t, kind, 7, 3, digest, 1, 2, 3)
		js, err := qc.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		head := `{"kind":"` + kind.String() + `","cluster":"default","term":7,"version":3,"digest":"` + hex.EncodeToString(digest[:]) + `","sigs":[{"member":1,"signature":"`
		if !strings.HasPrefix(string(js), head) {
			t.Errorf("JSON %s, want it to start with %s", js, head)
		}
		back, err := certify.DecodeQuorumCertificate(js)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, qc) {
			t.Fatalf("round trip: got %+v, want %+v", back, qc)
		}
		if err := certify.VerifyQuorumCertificate(c.keys, back); err != nil {
			t.Fatal(err)
		}
	}
	largest := certify.QuorumCertificate{Kind: certify.KindCommit, Cluster: strings.Repeat("c", certify.MaxClusterLen),
		Term: math.MaxUint64, Version: math.MaxUint64, Digest: digest}
	for i := range uint64(certify.MaxMembers) {
		largest.Sigs = append(largest.Sigs, certify.MemberSignature{Member: math.MaxUint64 - i, Signature: make([]byte, certify.SignatureSize)})
	}
	if js, err := largest.MarshalJSON(); err != nil {
		t.Fatal(err)
	} else if _, err := certify.DecodeQuorumCertificate(js); err != nil {
		t.Fatalf("the largest quorum certificate, %d bytes: %v", len(js), err)
	}
	sig := `{"member":1,"signature":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}`
	d := `"digest":"` + strings.Repeat("ab", 32) + `"`
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `{`, "unexpected EOF"},
		{"unknown field", `{"kind":"accept","cluster":"c","term":1,"version":1,` + d + `,"sigs":[` + sig + `],"leader":1}`, `unknown field "leader"`},
		{"votes, not sigs", `{"kind":"accept","cluster":"c","term":1,"version":1,` + d + `,"votes":[` + sig + `]}`, `unknown field "votes"`},
		{"trailing", `{"kind":"accept","cluster":"c","term":1,"version":1,` + d + `,"sigs":[` + sig + `]} {}`, "data after"},
		{"no kind", `{"cluster":"c","term":1,"version":1,` + d + `,"sigs":[` + sig + `]}`, `unknown kind ""`},
		{"a vote", `{"kind":"vote","cluster":"c","term":1,"version":1,` + d + `,"sigs":[` + sig + `]}`, "kind vote, want accept or commit"},
		{"no digest", `{"kind":"commit","cluster":"c","term":1,"version":1,"sigs":[` + sig + `]}`, `"digest" missing`},
		{"upper-case digest", `{"kind":"commit","cluster":"c","term":1,"version":1,"digest":"` + strings.Repeat("AB", 32) + `","sigs":[` + sig + `]}`, "lower-case hex"},
		{"zero digest", `{"kind":"commit","cluster":"c","term":1,"version":1,"digest":"` + strings.Repeat("00", 32) + `","sigs":[` + sig + `]}`, "zero digest"},
		{"no version", `{"kind":"commit","cluster":"c","term":1,` + d + `,"sigs":[` + sig + `]}`, "version 0"},
		{"term 0", `{"kind":"commit","cluster":"c","term":0,"version":1,` + d + `,"sigs":[` + sig + `]}`, "term 0"},
		{"no sigs", `{"kind":"commit","cluster":"c","term":1,"version":1,` + d + `,"sigs":[]}`, "0 commits"},
		{"twice", `{"kind":"commit","cluster":"c","term":1,"version":1,` + d + `,"sigs":[` + sig + `,` + sig + `]}`, "member 1 signs twice"},
		{"huge", `{"cluster":"` + strings.Repeat("a", certify.MaxJSONSize) + `"}`, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeQuorumCertificate([]byte(tc.in))
			wantErr(t, err, certify.ErrCertificate, tc.want)
		})
	}
}
