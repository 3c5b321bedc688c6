package history

import (
	"fmt"
	"testing"
	"time"
)

// With more clusters than files it holds open, the store closes the
// least recently used and opens it again at its next append: every
// record is written, in order, and comes back on the next Open.
func TestStoreBoundsItsOpenFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.openLimit = 4
	const clusters, nTerms = 20, 3
	for term := uint64(1); term <= nTerms; term++ {
		for i := range clusters {
			if _, err := s.Apply(fmt.Sprintf("c%d", i), leaderRec(term, uint64(i%5+1), time.Duration(term)*time.Second)); err != nil {
				t.Fatal(err)
			}
			if n := len(s.files); n > 4 {
				t.Fatalf("%d files open, want at most 4", n)
			}
		}
	}
	// The most recently used stay open.
	for _, name := range []string{"c16", "c17", "c18", "c19"} {
		if s.files[name] == nil {
			t.Errorf("%s, among the last 4 written, was closed", name)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.Count(); n != clusters {
		t.Fatalf("%d clusters after reopening, want %d", n, clusters)
	}
	for i := range clusters {
		c, _ := s.Cluster(fmt.Sprintf("c%d", i))
		if got := fmt.Sprint(terms(c)); got != "[1 2 3]" {
			t.Errorf("c%d: terms %s after reopening, want [1 2 3]", i, got)
		}
	}
}
