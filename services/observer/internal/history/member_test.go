package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

func memberRec(member uint64, event MemberEventKind, reason string, at time.Duration) Record {
	return Record{Kind: KindMember, Member: member, Event: event, Reason: reason, At: protocol.Timestamp{Time: t0.Add(at)}}
}

// events renders c's member events as seq:member:event:reason.
func events(c *Cluster) []string {
	var out []string
	for _, e := range c.Membership {
		out = append(out, fmt.Sprintf("%d:%d:%s:%s", e.Seq, e.Member, e.Event, e.Reason))
	}
	return out
}

func equalStrings(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// Member events are numbered in the order recorded, kept beside the
// leaderships through a reopen and a compaction, and numbered on from
// the last after both; malformed ones are refused.
func TestMemberEventsRecordedAndKept(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Apply("a", memberRec(7, MemberJoined, "presence", 0), memberRec(8, MemberJoined, "presence", time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].Seq != 1 || kept[1].Seq != 2 {
		t.Fatalf("kept %+v, want seq 1 and 2", kept)
	}
	for term := uint64(1); term <= 5; term++ {
		if _, err := s.Apply("a", leaderRec(term, 7, time.Duration(term)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Apply("a", memberRec(8, MemberLeft, "silent", 6*time.Second),
		Record{Kind: KindMember, Member: 0, Event: MemberLeft, Reason: "resign"},
		Record{Kind: KindMember, Member: 9, Event: "came", Reason: "presence"},
		Record{Kind: KindMember, Member: 9, Event: MemberJoined, Reason: "presence", Seq: 2}); err != nil {
		t.Fatal(err)
	}
	want := []string{"1:7:joined:presence", "2:8:joined:presence", "3:8:left:silent"}
	check := func(when string) {
		t.Helper()
		c, ok := s.Cluster("a")
		if !ok || !equalStrings(events(c), want) {
			t.Fatalf("%s: member events %v, want %v", when, events(c), want)
		}
	}
	check("recorded")
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after a reopen")
	if n, err := s.Compact("a", 2); err != nil || n != 3 {
		t.Fatalf("Compact: %d, %v; want 3 dropped", n, err)
	}
	check("after a compaction")
	kept, err = s.Apply("a", memberRec(8, MemberJoined, "presence", 7*time.Second))
	if err != nil || len(kept) != 1 || kept[0].Seq != 4 {
		t.Fatalf("after the compaction: kept %+v, %v; want seq 4", kept, err)
	}
	c, _ := s.Cluster("a")
	if got := terms(c); !equal(got, []uint64{4, 5}) {
		t.Errorf("terms %v, want [4 5]", got)
	}
}

// A cluster keeps its last MaxMembership member events, in memory, on
// disk and after a reopen, numbered on without a gap.
func TestMemberEventsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes more than MaxMembership records")
	}
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	total := MaxMembership + MaxSplitBrains + 5
	const batch = 100
	for i := 0; i < total; i += batch {
		recs := make([]Record, 0, batch)
		for j := i; j < min(total, i+batch); j++ {
			event := MemberJoined
			if j%2 == 1 {
				event = MemberLeft
			}
			recs = append(recs, memberRec(uint64(j%50+1), event, "presence", time.Duration(j)*time.Millisecond))
		}
		if _, err := s.Apply("a", recs...); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		c, _ := s.Cluster("a")
		if len(c.Membership) != MaxMembership {
			t.Fatalf("%s: %d member events, want %d", when, len(c.Membership), MaxMembership)
		}
		if first, last := c.Membership[0].Seq, c.Membership[MaxMembership-1].Seq; first != uint64(total-MaxMembership+1) || last != uint64(total) {
			t.Errorf("%s: member events %d to %d, want the newest, %d to %d", when, first, last, total-MaxMembership+1, total)
		}
	}
	check("after the flood")
	if n, limit := lines(t, dir, "a"), MaxMembership+MaxSplitBrains; n > limit {
		t.Errorf("the file holds %d lines after %d member events, want at most %d", n, total, limit)
	}
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after a reopen")
}

// A batch of member events alone is applied in place; one that fails to
// be written changes nothing, and the next is numbered as if it had not
// been tried.
func TestMemberEventsFailedAppend(t *testing.T) {
	dir := t.TempDir()
	s, ff := faultyStore(t, dir)
	if _, err := s.Apply("a", leaderRec(1, 3, 0), memberRec(3, MemberJoined, "presence", 0)); err != nil {
		t.Fatal(err)
	}
	ff.failSync = true
	if _, err := s.Apply("a", memberRec(3, MemberLeft, "resign", time.Second)); err == nil {
		t.Fatal("a failed append reported no error")
	}
	ff.failSync = false
	kept, err := s.Apply("a", memberRec(3, MemberLeft, "silent", 2*time.Second))
	if err != nil || len(kept) != 1 || kept[0].Seq != 2 {
		t.Fatalf("after the failure: kept %+v, %v; want seq 2", kept, err)
	}
	c, _ := s.Cluster("a")
	if want := []string{"1:3:joined:presence", "2:3:left:silent"}; !equalStrings(events(c), want) {
		t.Errorf("member events %v, want %v", events(c), want)
	}
	if got := terms(c); !equal(got, []uint64{1}) {
		t.Errorf("terms %v, want [1]", got)
	}
}
