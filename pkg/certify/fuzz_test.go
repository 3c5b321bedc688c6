package certify_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// FuzzDecodeStatement: what DecodeStatement accepts encodes back to the
// same bytes, so one statement has one encoding.
func FuzzDecodeStatement(f *testing.F) {
	for _, st := range statements() {
		data, err := st.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(certify.Prefix))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := certify.DecodeStatement(data)
		if err != nil {
			return
		}
		again, err := st.Encode()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", st, err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded %x, encodes as %x", data, again)
		}
	})
}

// FuzzDecodeJSON: what the JSON decoders accept survives a round trip.
func FuzzDecodeJSON(f *testing.F) {
	c := newCluster(f, 4)
	cert, err := c.certificate(f, 7, 4, 1, 2, 3).MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cert)
	certIn, err := c.certificateIn(f, 2, 7, 4, 1, 2, 3).MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(certIn)
	for _, st := range statements() {
		js, err := c.sign(f, st).MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(js)
	}
	ev, err := certify.Evidence{
		First:  c.sign(f, certify.Vote("default", 3, 7, 4)),
		Second: c.sign(f, certify.Vote("default", 3, 7, 2)),
	}.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ev)
	to, err := c.timeouts(f, 9, 1, 2).MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(to)
	digest := certify.Digest([]byte("version 3"))
	for _, kind := range []certify.Kind{certify.KindAccept, certify.KindCommit} {
		qc, err := c.quorum(f, kind, 7, 3, digest, 1, 2, 3).MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(qc)
	}
	set, err := json.Marshal(setOf(f, 3, 1, 2, 5))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(set)
	_, steps := chain(f, newCluster(f, 7))
	step, err := json.Marshal(steps[1])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(step)
	f.Fuzz(func(t *testing.T, data []byte) {
		if cert, err := certify.DecodeCertificate(data); err == nil {
			js, err := cert.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeCertificate(js)
			if err != nil || !reflect.DeepEqual(back, cert) {
				t.Fatalf("certificate %s: round trip gave %+v, %v", data, back, err)
			}
			_ = certify.VerifyCertificate(c.keys, cert)
		}
		if s, err := certify.DecodeSignedStatement(data); err == nil {
			js, err := s.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeSignedStatement(js)
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("statement %s: round trip gave %+v, %v", data, back, err)
			}
			_ = s.Verify(c.keys)
		}
		if tc, err := certify.DecodeTimeoutCertificate(data); err == nil {
			js, err := tc.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeTimeoutCertificate(js)
			if err != nil || !reflect.DeepEqual(back, tc) {
				t.Fatalf("time-outs %s: round trip gave %+v, %v", data, back, err)
			}
			_ = certify.VerifyTimeoutCertificate(c.keys, tc, 2)
		}
		if e, err := certify.DecodeEvidence(data); err == nil {
			if !certify.Contradicts(e.First.Statement, e.Second.Statement) {
				t.Fatalf("evidence %s accepted without a contradiction", data)
			}
			js, err := e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeEvidence(js)
			if err != nil || !reflect.DeepEqual(back, e) {
				t.Fatalf("evidence %s: round trip gave %+v, %v", data, back, err)
			}
			_ = certify.VerifyEvidence(c.keys, e)
		}
		if qc, err := certify.DecodeQuorumCertificate(data); err == nil {
			js, err := qc.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeQuorumCertificate(js)
			if err != nil || !reflect.DeepEqual(back, qc) {
				t.Fatalf("quorum certificate %s: round trip gave %+v, %v", data, back, err)
			}
			_ = certify.VerifyQuorumCertificate(c.keys, qc)
		}
		if s, err := certify.DecodeMemberSet(data); err == nil {
			js, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeMemberSet(js)
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("member set %s: round trip gave %+v, %v", data, back, err)
			}
			if _, err := s.Keys(); err != nil {
				t.Fatalf("member set %s: valid, but its keys: %v", data, err)
			}
		}
		if s, err := certify.DecodeStep(data); err == nil {
			js, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := certify.DecodeStep(js)
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("step %s: round trip gave %+v, %v", data, back, err)
			}
			_ = certify.VerifyStep("default", setOf(t, s.Set.Version-1, 1, 2, 3, 4), s)
		}
	})
}
