package clusterlist

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	for _, c := range []struct {
		list string
		want []string
	}{
		{"default", []string{"default"}},
		{"a, b ,c", []string{"a", "b", "c"}},
		{"shard-{0..3}", []string{"shard-0", "shard-1", "shard-2", "shard-3"}},
		{"s{8..10}x,t", []string{"s8x", "s9x", "s10x", "t"}},
		{"{1..1}", []string{"1"}},
	} {
		got, err := Expand(c.list)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.list, got, err, c.want)
		}
	}
	if got, err := Expand("shard-{0..255}"); err != nil || len(got) != 256 || got[255] != "shard-255" {
		t.Errorf("shard-{0..255}: %d names, %v", len(got), err)
	}
}

func TestExpandRefuses(t *testing.T) {
	for _, c := range []struct{ list, want string }{
		{"", "empty name"},
		{"a,,b", "empty name"},
		{"a.b", "must match"},
		{"s{3..1}", "backwards"},
		{"s{a..b}", "decimal"},
		{"s{1-3}", "{a..b}"},
		{"s{1..3", "without '}'"},
		{"s1..3}", "without '{'"},
		{"s{1..2}{1..2}", "one range"},
		{"a,b,a", "given twice"},
		{"s{0..2},s1", "given twice"},
		{"s{0..16384}", "more than"},
		{"x,s{1..16384}", "more than"},
		{"s{0..1234567890}", "decimal"},
		{"s{0..1}.x", "must match"},
	} {
		_, err := Expand(c.list)
		if !errors.Is(err, ErrList) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Expand(%q) = %v; want an error saying %q", c.list, err, c.want)
		}
	}
	if got, err := Expand("s{1..16384}"); err != nil || len(got) != Max {
		t.Errorf("Max names: %d, %v", len(got), err)
	}
}
