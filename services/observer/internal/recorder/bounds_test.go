package recorder

import (
	"testing"

	"github.com/baton-election/baton/pkg/protocol"
)

// A flood of heartbeats from ever new nodes and terms (without member
// keys, anyone may send them) holds a bounded tracker: at most
// maxActors nodes per cluster, the least recently heard forgotten first,
// and the split brains already reported kept only among the nodes still
// followed.
func TestTrackerBounded(t *testing.T) {
	g := newRig(t)
	for i := range 20 * maxActors {
		node := uint64(i + 1)
		g.apply("a", g.heartbeat("a", node, uint64(i%7+1), ms(i)))
	}
	c := g.r.live.clusters["a"]
	if len(c.actors) > maxActors {
		t.Errorf("%d nodes followed, want at most %d", len(c.actors), maxActors)
	}
	if limit := maxActors * (maxActors - 1) / 2; len(c.reported) > limit {
		t.Errorf("%d split brains remembered as reported, want at most %d", len(c.reported), limit)
	}
	if _, ok := c.actors[uint64(20*maxActors)]; !ok {
		t.Errorf("the node heard last is not followed")
	}
}

// A term outside the protocol's bounds (0, above protocol.MaxTerm) is no
// sign of a leader: it makes no record and is not asked for.
func TestTermsOutsideTheBoundsIgnored(t *testing.T) {
	g := newRig(t)
	g.apply("a", g.announce("a", 3, 7, ms(0), ms(0)))
	for _, term := range []uint64{0, protocol.MaxTerm + 1, 1<<64 - 1} {
		if recs := g.heartbeat("a", 4, term, ms(10)); len(recs) != 0 {
			t.Errorf("heartbeat of term %d: records %+v, want none", term, recs)
		}
		if recs := g.r.HeardAnnouncement("a", 4, term, ms(10)); len(recs) != 0 {
			t.Errorf("announcement of term %d heard: records %+v, want none", term, recs)
		}
	}
	if ask := g.r.Missing(ms(10_000)); len(ask) != 0 {
		t.Errorf("asked for %v, want nothing: no valid term is missing", ask)
	}
	if c := g.r.live.clusters["a"]; c != nil && len(c.actors) != 0 {
		t.Errorf("nodes followed: %v, want none", c.actors)
	}
}
