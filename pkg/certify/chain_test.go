package certify_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
)

// step makes the step to next, committed in term of "default" by
// signers (members of c).
func (c cluster) step(t testing.TB, next certify.MemberSet, term uint64, signers ...uint64) certify.Step {
	t.Helper()
	return certify.Step{Set: next, Commit: c.quorum(t, certify.KindCommit, term, next.Version, next.Digest("default"), signers...)}
}

// chain is version 0, members 1 to 4, then three steps: 5 joins (the
// commits of 3 of the 4), 1 leaves (4 of the 5), 6 joins (3 of the 4).
func chain(t testing.TB, c cluster) (certify.MemberSet, []certify.Step) {
	t.Helper()
	v0 := setOf(t, 0, 1, 2, 3, 4)
	return v0, []certify.Step{
		c.step(t, setOf(t, 1, 1, 2, 3, 4, 5), 3, 1, 2, 3),
		c.step(t, setOf(t, 2, 2, 3, 4, 5), 5, 2, 3, 4, 5),
		c.step(t, setOf(t, 3, 2, 3, 4, 5, 6), 6, 3, 4, 5),
	}
}

func TestFollowChain(t *testing.T) {
	c := newCluster(t, 7)
	v0, steps := chain(t, c)
	got, err := certify.FollowChain("default", v0, steps)
	if err != nil {
		t.Fatal(err)
	}
	if want := setOf(t, 3, 2, 3, 4, 5, 6); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	prev := v0
	for _, s := range steps {
		if err := certify.VerifyStep("default", prev, s); err != nil {
			t.Fatalf("step to version %d: %v", s.Set.Version, err)
		}
		prev = s.Set
	}
	// From a later set, the rest of the chain.
	if got, err := certify.FollowChain("default", steps[0].Set, steps[1:]); err != nil || got.Version != 3 {
		t.Errorf("from version 1: got version %d, %v", got.Version, err)
	}
	if got, err := certify.FollowChain("default", v0, nil); err != nil || !reflect.DeepEqual(got, v0) {
		t.Errorf("no steps: got %+v, %v, want version 0", got, err)
	}
	// Each set's keys check the signatures of its members' commits.
	keys, err := steps[2].Set.Keys()
	if err != nil {
		t.Fatal(err)
	}
	next := c.step(t, setOf(t, 4, 2, 3, 4, 5, 6, 7), 8, 2, 3, 4, 6)
	if err := certify.VerifyQuorumCertificate(keys, next.Commit); err != nil {
		t.Errorf("commits of version 3's members: %v", err)
	}
}

func TestFollowChainRefuses(t *testing.T) {
	c := newCluster(t, 7)
	v0, steps := chain(t, c)
	replace := func(i int, s certify.Step) []certify.Step {
		out := append([]certify.Step(nil), steps...)
		out[i] = s
		return out
	}
	withCommit := func(i int, alter func(*certify.QuorumCertificate)) []certify.Step {
		s := steps[i]
		alter(&s.Commit)
		return replace(i, s)
	}
	for _, tc := range []struct {
		name   string
		from   certify.MemberSet
		steps  []certify.Step
		target error
		want   string
	}{
		{"signed by the new set", v0, replace(0, c.step(t, setOf(t, 1, 1, 2, 3, 4, 5), 3, 2, 3, 5)), certify.ErrUnknownMember, "5"},
		{"a quorum of the new set only", v0, []certify.Step{c.step(t, setOf(t, 1, 1, 2, 3), 3, 1, 2)}, certify.ErrCertificate, "2 commits, a quorum of 4 members is 3"},
		{"one short", v0, replace(1, c.step(t, setOf(t, 2, 2, 3, 4, 5), 5, 2, 3, 4)), certify.ErrCertificate, "3 commits, a quorum of 5 members is 4"},
		{"a version skipped", v0, []certify.Step{steps[0], steps[2]}, certify.ErrMemberSet, "version 3 does not follow version 1"},
		{"starting after the next version", v0, steps[1:], certify.ErrMemberSet, "version 2 does not follow version 0"},
		{"starting at the known version", steps[0].Set, steps, certify.ErrMemberSet, "version 1 does not follow version 1"},
		{"two members changed", v0, []certify.Step{c.step(t, setOf(t, 1, 1, 2, 3, 4, 5, 6), 3, 1, 2, 3)}, certify.ErrMemberSet, "adds members 5, 6"},
		{"one member for another", v0, []certify.Step{c.step(t, setOf(t, 1, 1, 2, 3, 5), 3, 1, 2, 3)}, certify.ErrMemberSet, "adds member 5 and removes member 4"},
		{"accepts, not commits", v0, replace(0, certify.Step{Set: steps[0].Set,
			Commit: c.quorum(t, certify.KindAccept, 3, 1, steps[0].Set.Digest("default"), 1, 2, 3)}), certify.ErrCertificate, "a certificate of accepts, not of commits"},
		{"commits to another set", v0, replace(0, certify.Step{Set: steps[0].Set,
			Commit: c.quorum(t, certify.KindCommit, 3, 1, setOf(t, 1, 1, 2, 3, 4, 6).Digest("default"), 1, 2, 3)}), certify.ErrCertificate, "commits to another set"},
		{"commits to the set in another cluster", v0, withCommit(0, func(qc *certify.QuorumCertificate) { qc.Cluster = "other" }), certify.ErrCertificate, `commits in "other", not in "default"`},
		{"commits to another version", v0, withCommit(1, func(qc *certify.QuorumCertificate) { qc.Version = 3 }), certify.ErrCertificate, "step to version 2: commits to version 3"},
		{"a forged commit", v0, withCommit(2, func(qc *certify.QuorumCertificate) {
			qc.Sigs = append([]certify.MemberSignature(nil), qc.Sigs...)
			qc.Sigs[0].Signature = append([]byte(nil), qc.Sigs[0].Signature...)
			qc.Sigs[0].Signature[0] ^= 1
		}), certify.ErrSignature, "member 3"},
		{"too many steps", v0, make([]certify.Step, certify.MaxSteps+1), certify.ErrMemberSet, "a chain of 65 steps, at most 64"},
		{"an invalid start", setOf(t, 0, 2, 1), steps, certify.ErrMemberSet, "member 1 after member 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.FollowChain("default", tc.from, tc.steps)
			wantErr(t, err, tc.target, tc.want)
		})
	}
	// The chain of "default" is no chain of another cluster.
	_, err := certify.FollowChain("other", v0, steps)
	wantErr(t, err, certify.ErrCertificate, `commits in "default", not in "other"`)
}

func TestStepJSON(t *testing.T) {
	c := newCluster(t, 7)
	_, steps := chain(t, c)
	js, err := json.Marshal(steps[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(js), `{"set":{"version":2,"members":[{"id":2,`) || !strings.Contains(string(js), `,"commit":{"kind":"commit","cluster":"default","term":5,"version":2,`) {
		t.Errorf("JSON %s", js)
	}
	back, err := certify.DecodeStep(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, steps[1]) {
		t.Fatalf("round trip: got %+v, want %+v", back, steps[1])
	}
	var all []certify.Step
	data, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &all); err != nil || !reflect.DeepEqual(all, steps) {
		t.Fatalf("a chain through encoding/json: got %+v, %v", all, err)
	}

	// The largest step fits: MaxMembers members, and the commits of as
	// many, with the longest IDs and cluster name.
	largest := certify.Step{Set: certify.MemberSet{Version: math.MaxUint64}, Commit: certify.QuorumCertificate{Kind: certify.KindCommit,
		Cluster: strings.Repeat("c", certify.MaxClusterLen), Term: math.MaxUint64, Version: math.MaxUint64, Digest: certify.Digest(nil)}}
	for i := range uint64(certify.MaxMembers) {
		id := math.MaxUint64 - certify.MaxMembers + 1 + i
		largest.Set.Members = append(largest.Set.Members, certify.SetMember{ID: id, Key: publicKey(t, byte(i+1))})
		largest.Commit.Sigs = append(largest.Commit.Sigs, certify.MemberSignature{Member: id, Signature: make([]byte, certify.SignatureSize)})
	}
	if js, err := json.Marshal(largest); err != nil {
		t.Fatal(err)
	} else if _, err := certify.DecodeStep(js); err != nil {
		t.Fatalf("the largest step, %d bytes: %v", len(js), err)
	}

	set := string(js[len(`{"set":`):strings.Index(string(js), `,"commit":`)])
	commit := string(js[strings.Index(string(js), `,"commit":`)+len(`,"commit":`) : len(js)-1])
	for _, tc := range []struct {
		name, in string
		target   error
		want     string
	}{
		{"not JSON", `{`, certify.ErrMemberSet, "unexpected EOF"},
		{"no commit", `{"set":` + set + `}`, certify.ErrMemberSet, `needs "set" and "commit"`},
		{"no set", `{"commit":` + commit + `}`, certify.ErrMemberSet, `needs "set" and "commit"`},
		{"null set", `{"set":null,"commit":` + commit + `}`, certify.ErrMemberSet, `needs "set" and "commit"`},
		{"unknown field", `{"set":` + set + `,"commit":` + commit + `,"term":1}`, certify.ErrMemberSet, `unknown field "term"`},
		{"an invalid set", `{"set":{"version":2,"members":[]},"commit":` + commit + `}`, certify.ErrMemberSet, "0 members"},
		{"an invalid commit", `{"set":` + set + `,"commit":{"kind":"commit"}}`, certify.ErrCertificate, `"digest" missing`},
		{"trailing", `{"set":` + set + `,"commit":` + commit + `} {}`, certify.ErrMemberSet, "data after"},
		{"huge", `{"set":` + strings.Repeat(" ", certify.MaxJSONSize) + `}`, certify.ErrMemberSet, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certify.DecodeStep([]byte(tc.in))
			wantErr(t, err, tc.target, tc.want)
		})
	}
}
