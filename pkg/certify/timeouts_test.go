package certify_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// timeouts signs the time-outs of term by members of "default".
func (c cluster) timeouts(t testing.TB, term uint64, members ...uint64) certify.TimeoutCertificate {
	t.Helper()
	var signed []certify.SignedStatement
	for _, m := range members {
		signed = append(signed, c.sign(t, certify.Timeout("default", m, term)))
	}
	tc, err := certify.NewTimeoutCertificate(signed)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestTimeoutCertificate(t *testing.T) {
	c := newCluster(t, 7) // f = 2, quorum 5
	f1, q := certify.F(7)+1, certify.Quorum(7)
	three := c.timeouts(t, 9, 6, 1, 4)
	if err := certify.VerifyTimeoutCertificate(c.keys, three, f1); err != nil {
		t.Fatalf("f+1 time-outs: %v", err)
	}
	if got := []uint64{three.Timeouts[0].Member, three.Timeouts[1].Member, three.Timeouts[2].Member}; !reflect.DeepEqual(got, []uint64{1, 4, 6}) {
		t.Errorf("time-outs in order %v, want [1 4 6]", got)
	}
	err := certify.VerifyTimeoutCertificate(c.keys, three, q)
	wantErr(t, err, certify.ErrCertificate, "3 time-outs, the number asked of 7 members is 5")
	if err := certify.VerifyTimeoutCertificate(c.keys, c.timeouts(t, 9, 1, 2, 3, 4, 5), q); err != nil {
		t.Fatalf("a quorum of time-outs: %v", err)
	}

	js, err := three.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := certify.DecodeTimeoutCertificate(js)
	if err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	if !reflect.DeepEqual(back, three) {
		t.Fatalf("round trip: got %+v, want %+v", back, three)
	}

	for _, tc := range []struct {
		name   string
		cert   func() certify.TimeoutCertificate
		need   int
		target error
		want   string
	}{
		{"the liars alone", func() certify.TimeoutCertificate { return c.timeouts(t, 9, 1, 2) }, 2, certify.ErrCertificate, "want f+1 = 3 to 7"},
		{"more than all", func() certify.TimeoutCertificate { return c.timeouts(t, 9, 1, 2, 3) }, 8, certify.ErrCertificate, "want f+1 = 3 to 7"},
		{"too few", func() certify.TimeoutCertificate { return c.timeouts(t, 9, 1, 2) }, f1, certify.ErrCertificate, "2 time-outs"},
		{"duplicate", func() certify.TimeoutCertificate {
			x := c.timeouts(t, 9, 1, 2)
			x.Timeouts = append(x.Timeouts, x.Timeouts[0])
			return x
		}, f1, certify.ErrCertificate, "member 1 signs twice"},
		{"unknown member", func() certify.TimeoutCertificate {
			x := c.timeouts(t, 9, 1, 2, 3)
			x.Timeouts[2].Member = 8
			return x
		}, f1, certify.ErrUnknownMember, "8"},
		{"other term", func() certify.TimeoutCertificate { x := c.timeouts(t, 9, 1, 2, 3); x.Term = 10; return x }, f1, certify.ErrSignature, "term 10"},
		{"other cluster", func() certify.TimeoutCertificate { x := c.timeouts(t, 9, 1, 2, 3); x.Cluster = "b"; return x }, f1, certify.ErrSignature, "member 1"},
		{"another member's signature", func() certify.TimeoutCertificate {
			x := c.timeouts(t, 9, 1, 2, 4)
			x.Timeouts[2].Member = 5
			return x
		}, f1, certify.ErrSignature, "member 5"},
		{"forged", func() certify.TimeoutCertificate {
			x := c.timeouts(t, 9, 1, 2, 3)
			x.Timeouts[1].Signature = bytes.Clone(x.Timeouts[1].Signature)
			x.Timeouts[1].Signature[63] ^= 1
			return x
		}, f1, certify.ErrSignature, "member 2"},
		{"term 0", func() certify.TimeoutCertificate { x := c.timeouts(t, 9, 1, 2, 3); x.Term = 0; return x }, f1, certify.ErrCertificate, "term 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := certify.VerifyTimeoutCertificate(c.keys, tc.cert(), tc.need)
			wantErr(t, err, certify.ErrCertificate, tc.want)
			wantErr(t, err, tc.target)
		})
	}

	vote := c.sign(t, certify.Vote("default", 1, 9, 2))
	to := func(m, term uint64) certify.SignedStatement { return c.sign(t, certify.Timeout("default", m, term)) }
	for _, tc := range []struct {
		name string
		in   []certify.SignedStatement
		want string
	}{
		{"none", nil, "0 time-outs"},
		{"a vote", []certify.SignedStatement{to(2, 9), vote}, "a vote of member 1"},
		{"two terms", []certify.SignedStatement{to(2, 9), to(3, 8)}, "member 3 gives up term 8"},
		{"twice", []certify.SignedStatement{to(2, 9), to(2, 9)}, "member 2 gives up twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.NewTimeoutCertificate(tc.in)
			wantErr(t, err, certify.ErrCertificate, tc.want)
		})
	}
	for _, in := range []string{
		`{"cluster":"default","term":9,"timeouts":[]}`,
		`{"cluster":"default","term":9,"votes":[]}`,
		`{"cluster":"default","term":0,"timeouts":[{"member":1,"signature":"AAAA"}]}`,
	} {
		if _, err := certify.DecodeTimeoutCertificate([]byte(in)); err == nil {
			t.Errorf("%s: got no error", in)
		}
	}
}
