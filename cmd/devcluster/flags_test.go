package main

import (
	"strings"
	"testing"
)

// Byzantine below 4 nodes tolerates no liar: the nodes would refuse it,
// so the tool says so at once, unless the nodes are to opt in.
func TestByzantineBelowFourNodes(t *testing.T) {
	t.Setenv("ELECTION_BYZANTINE_SMALL", "")
	for _, args := range [][]string{
		{"-algorithm", "byzantine", "-nodes", "3"},
		{"-algorithm", "all", "-nodes", "1"},
	} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), "ELECTION_BYZANTINE_SMALL=true") {
			t.Errorf("parseFlags(%q) = %v, want an error naming ELECTION_BYZANTINE_SMALL=true", args, err)
		}
	}
	for _, args := range [][]string{
		{"-algorithm", "byzantine", "-nodes", "4"},
		{"-algorithm", "ring", "-nodes", "3"},
	} {
		if _, err := parseFlags(args); err != nil {
			t.Errorf("parseFlags(%q) = %v, want no error", args, err)
		}
	}
	t.Setenv("ELECTION_BYZANTINE_SMALL", "true")
	if _, err := parseFlags([]string{"-algorithm", "byzantine", "-nodes", "3"}); err != nil {
		t.Errorf("3 byzantine nodes with ELECTION_BYZANTINE_SMALL=true: %v, want no error", err)
	}
}
