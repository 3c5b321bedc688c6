package leader_test

import (
	"reflect"
	"testing"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/batontest/clustertest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
)

// With real nodes: a watcher that starts after the election gets the
// leader from the leading node's answer, then the successor when the
// leader leaves.
func TestWatchWithRealNodes(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	stops := clustertest.Start(t, url, "default", protocol.Bully, []uint64{1, 2, 3})

	first := watch(t, batontest.Connect(t, url), "default", leader.WithoutStream())
	var elected protocol.Announcement
	for elected.Leader != 3 {
		elected = first.next(t)
	}

	late := watch(t, batontest.Connect(t, url), "default", leader.WithoutStream())
	if got := late.next(t); !reflect.DeepEqual(got, elected) {
		t.Fatalf("late watcher's first leader = %+v, want %+v", got, elected)
	}

	stops[3]() // leaves cleanly: node 2 takes over at once
	got := late.next(t)
	if got.Leader != 2 || got.Term <= elected.Term {
		t.Errorf("after node 3 left: %+v, want node 2 with a term above %d", got, elected.Term)
	}
}
