package main

import (
	"testing"
	"time"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

// After the whole cluster restarts with its data, a byzantine member
// reports the leader of the term it restored (that term's certificate),
// though that leader has given the term up and no one leads: agreement
// on it is no sign that the cluster has elected. The restart before the
// "heartbeats alone" rounds waits until the leader leads, and every node
// names it in its term.
func TestAgreedLeading(t *testing.T) {
	var nodes []*localcluster.Node
	for id := uint64(1); id <= 4; id++ {
		nodes = append(nodes, &localcluster.Node{ID: id})
	}
	v := &views{by: map[uint64]view{}, changed: make(chan struct{})}
	set := func(id, leader, term uint64, state string) {
		v.by[id] = view{status: protocol.Status{ID: id, Leader: &leader, Term: term, State: state}, up: true, at: time.Now()}
	}
	// Restored: every member names 4 in term 16; 4 gave that term up.
	for id := uint64(1); id <= 3; id++ {
		set(id, 4, 16, "follower")
	}
	set(4, 4, 16, "candidate")
	if ok, _, _ := v.agreed(nodes, 4, false); !ok {
		t.Fatal("agreed(leading=false) = false: every node names 4")
	}
	if ok, _, _ := v.agreed(nodes, 4, true); ok {
		t.Error("agreed(leading=true) = true while 4 does not lead")
	}
	// 4 leads in term 21; node 2 still names it in term 16.
	for _, id := range []uint64{1, 3} {
		set(id, 4, 21, "follower")
	}
	set(4, 4, 21, "leader")
	if ok, _, _ := v.agreed(nodes, 4, true); ok {
		t.Error("agreed(leading=true) = true while node 2 names 4 in an older term")
	}
	set(2, 4, 21, "follower")
	if ok, _, _ := v.agreed(nodes, 4, true); !ok {
		t.Errorf("agreed(leading=true) = false: 4 leads in term 21 and every node names it there")
	}
}
