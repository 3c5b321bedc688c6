package observer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/batontest/clustertest"
	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// An observer started after the nodes, when no stream captured their
// election, learns the current leadership from the leader itself: it
// records the leader's original announcement, once. The cluster is signed,
// so the answer must carry the leader's signature.
func TestObserverStartedAfterTheElection(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	signers, keys := batontest.MemberKeys(t, 1, 2, 3)
	clustertest.Start(t, url, "late", protocol.Bully, []uint64{1, 2, 3}, clustertest.WithKeys(signers, keys))
	nc := batontest.Connect(t, url)

	var want protocol.Announcement
	batontest.CheckFor(t, waitTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a, err := leader.Current(ctx, nc, "late", leader.WithoutStream(), leader.WithKeys(keys), leader.WithAlgorithm(protocol.Bully))
		if err != nil || a.Leader != 3 {
			return fmt.Errorf("no leader 3 before the observer started: %v, %v", a, err)
		}
		want = a
		return nil
	})

	cfg := testConfig(url, t.TempDir())
	cfg.Keys = map[string]*signing.MemberKeys{"late": stated(t, keys, protocol.Bully)}
	o := startObserver(t, cfg, nil)
	// The counter moves just after the store: wait for both.
	o.waitFor(t, "the leadership to be learnt from the leader", func() bool {
		return o.leaderships("late") == 1 && counter(o.metrics.announcements.WithLabelValues("recorded")) >= 1
	})
	c, _ := o.store.Cluster("late")
	got, ok := c.Current()
	if !ok || got.Leader != want.Leader || got.Term != want.Term || !got.StartedAt.Equal(want.At.Time) {
		t.Fatalf("recorded %+v (current %v), want leader %d term %d started at %v", got, ok, want.Leader, want.Term, want.At)
	}
	if n := counter(o.metrics.announcements.WithLabelValues("recorded")); n != 1 {
		t.Errorf("%v announcements recorded, want 1", n)
	}
}
