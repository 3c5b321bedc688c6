package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// flapWindow is how soon a leader change must be reversed to count as a
// flap: the observer's rule too (history.FlapWindow).
const flapWindow = time.Second

// seenLeadership is a leadership as a node learnt of it: its leader, and
// when the node accepted or claimed it.
type seenLeadership struct {
	leader uint64
	at     time.Time
}

// flapTracker follows the leaderships a node learns of, one per new
// (leader, term), and tells which reverse the one before within
// flapWindow: the node followed A, then B, then A again less than
// flapWindow after it took B (a takeover and a takeback, the mark of a
// spurious suspicion). It is the observer's rule applied to what one node
// saw: a leadership it never heard of is not in its sequence. The loop
// goroutine owns it.
type flapTracker struct {
	// prev and cur are the last two leaderships seen, cur the latest;
	// zero before there are as many.
	prev, cur seenLeadership
}

// seen notes that the node accepted or claimed a leadership of leader at
// at, and reports whether that reverses the leadership before it; if so,
// short is that leadership. A zero leader (none known) is ignored.
func (f *flapTracker) seen(leader uint64, at time.Time) (short seenLeadership, reversed bool) {
	if leader == 0 {
		return seenLeadership{}, false
	}
	prev, cur := f.prev, f.cur
	reversed = prev.leader == leader && cur.leader != 0 && cur.leader != leader && at.Sub(cur.at) < flapWindow
	f.prev, f.cur = cur, seenLeadership{leader: leader, at: at}
	return cur, reversed
}

// newFlapsCounter returns election_leader_flaps_total, registered in reg.
func newFlapsCounter(reg *prometheus.Registry) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "election_leader_flaps_total",
		Help: "Leader changes this node saw reversed within a second: it followed A, then B, then A again less than 1 s after it took B.",
	})
	reg.MustRegister(c)
	return c
}

// leaderChanged counts and logs a leadership of leader with term, learnt
// now, if it reverses the one before it.
func (n *Node) leaderChanged(leader, term uint64) {
	now := n.cfg.Now()
	short, reversed := n.flaps.seen(leader, now)
	if !reversed {
		return
	}
	n.metrics.leaderFlaps.Inc()
	n.log.Info("leader change reversed within a second (flap)", "leader", leader, "term", term,
		"between", short.leader, "lasted", now.Sub(short.at))
}
