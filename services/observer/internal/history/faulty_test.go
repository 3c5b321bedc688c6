package history

import (
	"bytes"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

// evidence is member's two votes in term 4, for 1 and for 2. The history
// does not check signatures (the observer does before recording).
func evidence(member uint64) *certify.Evidence {
	sig := bytes.Repeat([]byte{9}, certify.SignatureSize)
	return &certify.Evidence{
		First:  certify.SignedStatement{Statement: certify.Vote("a", member, 4, 1), Signature: sig},
		Second: certify.SignedStatement{Statement: certify.Vote("a", member, 4, 2), Signature: sig},
	}
}

func faultyRec(member uint64, at time.Duration) Record {
	return Record{Kind: KindFaulty, Member: member, At: protocol.Timestamp{Time: t0.Add(at)}, Evidence: evidence(member)}
}

func faultyMembers(c *Cluster) []uint64 {
	var ids []uint64
	for _, f := range c.Faulty {
		ids = append(ids, f.Member)
	}
	return ids
}

// A faulty member is recorded once, with its first proof, kept on disk
// across a reopen and a compaction, and never for a proof of another
// member.
func TestFaultyMembersRecordedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := faultyRec(4, 0)
	other.Member = 5 // the proof convicts 4
	kept, err := s.Apply("a", leaderRec(1, 3, 0), faultyRec(4, time.Second), faultyRec(4, 2*time.Second), other, Record{Kind: KindFaulty, Member: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[1].Kind != KindFaulty || kept[1].Member != 4 {
		t.Errorf("kept %+v, want the leader and member 4's first proof", kept)
	}
	for term := uint64(2); term <= 5; term++ {
		if _, err := s.Apply("a", leaderRec(term, 3, time.Duration(term)*time.Second), faultyRec(term+10, time.Duration(term)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Compact("a", 2); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := s.Cluster("a")
	if got, want := faultyMembers(c), []uint64{4, 12, 13, 14, 15}; !equal(got, want) {
		t.Errorf("faulty members after compaction and reopen = %v, want %v", got, want)
	}
	f, ok := c.FaultyMember(4)
	if !ok || !f.At.Equal(t0.Add(time.Second)) || f.Evidence.First.Statement.Leader != 1 || f.Evidence.Second.Statement.Leader != 2 {
		t.Errorf("member 4 = %+v, %t; want its first proof, recorded at 1s", f, ok)
	}
	if got := terms(c); !equal(got, []uint64{4, 5}) {
		t.Errorf("terms after compaction = %v, want [4 5]", got)
	}
}

func TestFaultyMembersBounded(t *testing.T) {
	c := &Cluster{}
	for m := uint64(1); m <= MaxFaulty+5; m++ {
		c.Apply(faultyRec(m, 0))
	}
	if len(c.Faulty) != MaxFaulty {
		t.Errorf("%d faulty members recorded, want at most %d", len(c.Faulty), MaxFaulty)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
