package history

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

func splitRec(i int) Record {
	return Record{Kind: KindSplit, At: protocol.Timestamp{Time: t0.Add(time.Duration(i) * time.Millisecond)}, Reason: SplitSameTerm,
		Leaders: []Acting{{Leader: uint64(i), Term: 7}, {Leader: uint64(i) + 1, Term: 7}}}
}

// lines counts the lines of cluster's file under dir.
func lines(t *testing.T, dir, cluster string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, cluster+fileSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// A flood of split brains keeps the last MaxSplitBrains, in memory, on
// disk and after a reopen: the oldest are dropped, and the file is
// rewritten without them, so neither grows with the flood.
func TestSplitBrainsBounded(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply("a", leaderRec(7, 3, 0)); err != nil {
		t.Fatal(err)
	}
	total := 2*MaxSplitBrains + 7
	for i := 1; i <= total; i++ {
		if _, err := s.Apply("a", splitRec(i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		c, _ := s.Cluster("a")
		if len(c.SplitBrains) != MaxSplitBrains {
			t.Fatalf("%s: %d split brains kept, want %d", when, len(c.SplitBrains), MaxSplitBrains)
		}
		if first, last := c.SplitBrains[0].Leaders[0].Leader, c.SplitBrains[MaxSplitBrains-1].Leaders[0].Leader; first != uint64(total-MaxSplitBrains+1) || last != uint64(total) {
			t.Errorf("%s: split brains kept from %d to %d, want the newest: %d to %d", when, first, last, total-MaxSplitBrains+1, total)
		}
		if got := terms(c); !equal(got, []uint64{7}) {
			t.Errorf("%s: terms %v, want [7]", when, got)
		}
	}
	check("after the flood")
	if n, limit := lines(t, dir, "a"), 2*MaxSplitBrains+1; n > limit {
		t.Errorf("the file holds %d lines after %d split brains, want at most %d", n, total, limit)
	}
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after a reopen")
}

// Faulty members beyond MaxFaulty drop the oldest: the newest proofs are
// kept.
func TestFaultyMembersKeepTheNewest(t *testing.T) {
	c := &Cluster{}
	for m := uint64(1); m <= MaxFaulty+5; m++ {
		c.Apply(faultyRec(m, 0))
	}
	if got := faultyMembers(c); len(got) != MaxFaulty || got[0] != 6 || got[MaxFaulty-1] != MaxFaulty+5 {
		t.Errorf("faulty members %v, want the newest %d: 6 to %d", got, MaxFaulty, MaxFaulty+5)
	}
}
