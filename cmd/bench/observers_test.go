package main

import (
	"slices"
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

// An observer with member keys drops what no member key signed: the
// clusters without keys (bully, ring, paxos) are recorded by an observer
// of their own, or a run with byzantine clusters measures no observer
// lag for them.
func TestObserverPerKind(t *testing.T) {
	tests := []struct {
		algorithms []protocol.Algorithm
		want       []bool
	}{
		{protocol.Algorithms, []bool{false, true}},
		{protocol.CrashAlgorithms, []bool{false}},
		{[]protocol.Algorithm{protocol.Byzantine}, []bool{true}},
	}
	for _, tt := range tests {
		if got := observerKinds(tt.algorithms); !slices.Equal(got, tt.want) {
			t.Errorf("observerKinds(%v) = %v, want %v", tt.algorithms, got, tt.want)
		}
	}
	e := &environment{observers: map[bool]*observerProc{false: {url: "http://plain"}, true: {url: "http://keyed"}}}
	for a, want := range map[protocol.Algorithm]string{
		protocol.Bully: "http://plain", protocol.Ring: "http://plain", protocol.Paxos: "http://plain", protocol.Byzantine: "http://keyed",
	} {
		if got := e.observerURL(a); got != want {
			t.Errorf("observerURL(%s) = %q, want %q", a, got, want)
		}
	}
	if got := (&environment{}).observerURL(protocol.Bully); got != "" {
		t.Errorf("observerURL without observers = %q, want none", got)
	}
}
