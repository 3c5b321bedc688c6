package paxos

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// dynNet runs Paxos nodes of dynamic membership in lock step: each step
// ticks every node up, then delivers what they sent, in order, to the
// nodes up and not cut off (a message to or from a cut-off node is
// lost). After every delivery it checks that at most one node holds a
// valid lease, and stores each node's hard state as the runtime would.
type dynNet struct {
	t      *testing.T
	voters []uint64
	nodes  map[uint64]*Machine
	disk   map[uint64]election.HardState
	cut    map[uint64]bool
	// drop, if set, loses the copy of msg to node to.
	drop  func(msg protocol.Message, to uint64) bool
	queue []protocol.Message
	inc   uint64
	steps int
}

func newDynNet(t *testing.T, voters ...uint64) *dynNet {
	return &dynNet{t: t, voters: voters, nodes: map[uint64]*Machine{}, disk: map[uint64]election.HardState{}, cut: map[uint64]bool{}}
}

// start starts node id, from its disk if it has one.
func (n *dynNet) start(id uint64) {
	n.t.Helper()
	n.inc++
	st, restored := n.disk[id]
	m, err := New(election.Config{ID: id, Members: []uint64{id}, Dynamic: true, Voters: n.voters,
		Timing: election.DefaultLeaseTiming(5), State: st, Restored: restored, Incarnation: 1000*id + n.inc})
	if err != nil {
		n.t.Fatal(err)
	}
	n.nodes[id] = m
	m.Start()
	n.collect(id)
}

// stop crashes node id: its machine is gone, its disk stays.
func (n *dynNet) stop(id uint64) { delete(n.nodes, id) }

func (n *dynNet) collect(id uint64) {
	m := n.nodes[id]
	rd := m.Ready()
	if rd.State != nil {
		n.disk[id] = *rd.State
	}
	for _, msg := range rd.Messages {
		msg.From, msg.Inc = id, m.inc
		if err := protocol.ValidateFor(msg, protocol.DynamicMember); err != nil {
			n.t.Fatalf("node %d sent an invalid message %v: %v", id, msg, err)
		}
		n.queue = append(n.queue, msg)
	}
}

// ids are the nodes up, in increasing order.
func (n *dynNet) ids() []uint64 {
	var ids []uint64
	for id := range n.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// step ticks every node once and delivers what is queued.
func (n *dynNet) step() {
	n.t.Helper()
	n.steps++
	for _, id := range n.ids() {
		n.nodes[id].Tick()
		n.collect(id)
		n.check()
	}
	for len(n.queue) > 0 {
		msg := n.queue[0]
		n.queue = n.queue[1:]
		if n.cut[msg.From] {
			continue
		}
		for _, id := range n.ids() {
			if id == msg.From || msg.To != 0 && msg.To != id || n.cut[id] || n.drop != nil && n.drop(msg, id) {
				continue
			}
			n.nodes[id].Step(msg)
			n.collect(id)
			n.check()
		}
	}
}

// run steps until done holds, at most limit steps.
func (n *dynNet) run(limit int, what string, done func() bool) {
	n.t.Helper()
	for range limit {
		if done() {
			return
		}
		n.step()
	}
	if !done() {
		n.t.Fatalf("after %d steps: not %s; %s", limit, what, n.describe())
	}
}

// leaders are the nodes that hold a valid lease.
func (n *dynNet) leaders() []uint64 {
	var out []uint64
	for _, id := range n.ids() {
		m := n.nodes[id]
		if st := m.Status(); st.Role == election.Leader && m.now < st.LeaseUntil {
			out = append(out, id)
		}
	}
	return out
}

func (n *dynNet) check() {
	n.t.Helper()
	if l := n.leaders(); len(l) > 1 {
		n.t.Fatalf("two leaders at once: %v; %s", l, n.describe())
	}
}

func (n *dynNet) describe() string {
	s := ""
	for _, id := range n.ids() {
		st := n.nodes[id].Status()
		s += " " + st.Role.String() + "(" + itoa(id) + ",term " + itoa(st.Term) + ",voters " + showVoters(n.nodes[id].Voters()) + ")"
	}
	return s
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func showVoters(v *protocol.Voters) string {
	if v == nil {
		return "nil"
	}
	s := "v" + itoa(v.Version) + ":"
	for _, id := range v.Voters {
		s += itoa(id)
	}
	if v.Joint() {
		s += "→"
		for _, id := range v.Next {
			s += itoa(id)
		}
	}
	return s
}

// leader is the one leader, 0 if none.
func (n *dynNet) leader() uint64 {
	if l := n.leaders(); len(l) == 1 {
		return l[0]
	}
	return 0
}

// voters reports whether every node up holds voters as a configuration
// that is not joint.
func (n *dynNet) settledOn(voters ...uint64) bool {
	for _, id := range n.ids() {
		v := n.nodes[id].Voters()
		if v.Joint() || !slices.Equal(v.Voters, voters) {
			return false
		}
	}
	return true
}

// TestVotersChange: voters 1, 2, 3 and candidates 4, 5, 6; the leader
// moves the voters to 4, 5, 6 through a joint configuration; then the old
// voters leave and the new ones elect on their own. Never two leaders.
func TestVotersChange(t *testing.T) {
	n := newDynNet(t, 1, 2, 3)
	for id := uint64(1); id <= 6; id++ {
		n.start(id)
	}
	n.run(500, "a leader, node 6", func() bool { return n.leader() == 6 })
	lead := n.nodes[6]
	if err := lead.ChangeVoters([]uint64{4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	if v := lead.Voters(); !v.Joint() || v.Version != 1 {
		t.Fatalf("after ChangeVoters the leader holds %+v, want the joint configuration, version 1", v)
	}
	if err := lead.ChangeVoters([]uint64{1, 2, 3}); !errors.Is(err, ErrVotersChanging) {
		t.Fatalf("a second change while one is under way: %v, want ErrVotersChanging", err)
	}
	n.run(100, "every node on voters 4, 5, 6", func() bool { return n.settledOn(4, 5, 6) })
	if v := lead.Voters(); v.Version != 2 {
		t.Fatalf("the leader ends on version %d, want 2", v.Version)
	}
	if d := n.disk[1].Voters; d == nil || d.Version < 1 {
		t.Fatalf("old voter 1 stored %+v, want the newer configuration on its disk", d)
	}
	// The old voters leave: the new ones keep a leader, and elect one
	// after the leader crashes.
	for _, id := range []uint64{1, 2, 3} {
		n.stop(id)
	}
	n.run(500, "node 6 still leading on voters 4, 5, 6", func() bool { return n.leader() == 6 })
	n.stop(6)
	n.run(500, "node 5 leading after 6 crashed", func() bool { return n.leader() == 5 })
}

// TestStaleVoterCannotLead: an old voter cut off during the change comes
// back with the old configuration and campaigns; the others refuse its
// configuration, it learns the new one, and it never leads beside the
// leader.
func TestStaleVoterCannotLead(t *testing.T) {
	n := newDynNet(t, 1, 2, 3)
	for id := uint64(1); id <= 6; id++ {
		n.start(id)
	}
	n.run(500, "a leader, node 6", func() bool { return n.leader() == 6 })
	n.cut[3] = true
	if err := n.nodes[6].ChangeVoters([]uint64{4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	n.run(100, "the others on voters 4, 5, 6", func() bool {
		for _, id := range []uint64{1, 2, 4, 5, 6} {
			if v := n.nodes[id].Voters(); v.Joint() || !slices.Equal(v.Voters, []uint64{4, 5, 6}) {
				return false
			}
		}
		return true
	})
	if v := n.nodes[3].Voters(); v.Version != 0 {
		t.Fatalf("the cut-off node moved to %+v", v)
	}
	// Node 3, with the old voters, hears nothing and campaigns; its
	// Prepare reaches the others once the cut heals.
	n.run(100, "node 3 campaigning", func() bool { return n.nodes[3].phase == preparing })
	delete(n.cut, 3)
	n.run(300, "node 3 on voters 4, 5, 6 and node 6 leading", func() bool {
		return n.settledOn(4, 5, 6) && n.leader() == 6
	})
}

// TestVotersSurviveARestart: a node restarted from its disk keeps the
// configuration it adopted, not the configured voters.
func TestVotersSurviveARestart(t *testing.T) {
	n := newDynNet(t, 1, 2, 3)
	for id := uint64(1); id <= 4; id++ {
		n.start(id)
	}
	n.run(500, "a leader, node 4", func() bool { return n.leader() == 4 })
	if err := n.nodes[4].ChangeVoters([]uint64{2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	n.run(100, "every node on voters 2, 3, 4", func() bool { return n.settledOn(2, 3, 4) })
	n.stop(2)
	n.start(2)
	if v := n.nodes[2].Voters(); !slices.Equal(v.Voters, []uint64{2, 3, 4}) || v.Version != 2 {
		t.Fatalf("restarted node 2 holds %+v, want version 2 with voters 2, 3, 4", v)
	}
}

// TestChangeVotersRefusals: only a leader of dynamic membership changes
// the voters, to a valid set.
func TestChangeVotersRefusals(t *testing.T) {
	if err := elect(t).ChangeVoters([]uint64{2, 4, 6}); !errors.Is(err, ErrNotDynamic) {
		t.Fatalf("static membership: %v, want ErrNotDynamic", err)
	}
	n := newDynNet(t, 1, 2, 3)
	for id := uint64(1); id <= 3; id++ {
		n.start(id)
	}
	n.run(500, "a leader, node 3", func() bool { return n.leader() == 3 })
	if err := n.nodes[2].ChangeVoters([]uint64{1, 2}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower: %v, want ErrNotLeader", err)
	}
	tooMany := make([]uint64, protocol.MaxVoters+1)
	for i := range tooMany {
		tooMany[i] = uint64(i + 1)
	}
	for _, bad := range [][]uint64{nil, {0, 1}, {1, 1}, {protocol.MaxMemberID + 1}, tooMany} {
		if err := n.nodes[3].ChangeVoters(bad); err == nil {
			t.Fatalf("voters %v accepted", bad)
		}
	}
	if v := n.nodes[3].Voters(); v.Version != 0 {
		t.Fatalf("a refused change moved the voters to %+v", v)
	}
}

// TestStaleConfigurationRefused: an acceptor refuses a candidate whose
// voter configuration is older than its own. Voters 2, 5, 6 move to 4, 5,
// 7 under leader 7 while 6 is cut off; 2 adopts the joint configuration
// but not the last step. Cut off from the rest together, 6 (old voters)
// campaigns and 2 would give it a majority of the old voters, beside
// leader 7, if it did not refuse it.
func TestStaleConfigurationRefused(t *testing.T) {
	n := newDynNet(t, 2, 5, 6)
	for _, id := range []uint64{2, 4, 5, 6, 7} {
		n.start(id)
	}
	n.run(500, "a leader, node 7", func() bool { return n.leader() == 7 })
	n.cut[6] = true
	n.drop = func(msg protocol.Message, to uint64) bool { return to == 2 && msg.Cfg != nil && msg.Cfg.Version >= 2 }
	if err := n.nodes[7].ChangeVoters([]uint64{4, 5, 7}); err != nil {
		t.Fatal(err)
	}
	n.run(100, "nodes 4, 5, 7 on voters 4, 5, 7 and node 2 joint", func() bool {
		for _, id := range []uint64{4, 5, 7} {
			if v := n.nodes[id].Voters(); v.Joint() || !slices.Equal(v.Voters, []uint64{4, 5, 7}) {
				return false
			}
		}
		return n.nodes[2].Voters().Joint()
	})
	// {2, 6} against {4, 5, 7}.
	delete(n.cut, 6)
	side := map[uint64]bool{2: true, 6: true}
	n.drop = func(msg protocol.Message, to uint64) bool { return side[msg.From] != side[to] }
	n.run(2000, "node 6 holding the joint voters", func() bool { return n.nodes[6].Voters().Joint() })
	for range 1000 {
		n.step() // never two leaders (check), and 7 goes on leading
	}
	if l := n.leader(); l != 7 {
		t.Fatalf("leader %d, want 7; %s", l, n.describe())
	}
}

// TestVotersRandom changes the voters at random while nodes crash,
// restart from their disks, are cut off and heal, and messages are lost
// or delayed by a step, over many seeds: never two leaders (dynNet
// checks after every delivery), and a leader once the network heals.
func TestVotersRandom(t *testing.T) {
	seeds := 300
	if testing.Short() || raceEnabled {
		seeds = 40
	}
	ids := []uint64{1, 2, 3, 4, 5, 6, 7}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := newDynNet(t, 1, 2, 3)
		for _, id := range ids {
			n.start(id)
		}
		var late []protocol.Message
		n.drop = func(msg protocol.Message, to uint64) bool {
			switch r := rng.IntN(100); {
			case r < 5:
				return true // lost
			case r < 10:
				m := msg
				m.To = to
				late = append(late, m) // delivered a step later
				return true
			}
			return false
		}
		changes := 0
		for range 3000 {
			n.queue = append(n.queue, late...)
			late = late[:0]
			n.step()
			switch r := rng.IntN(1000); {
			case r < 4:
				if up := n.ids(); len(up) > 1 {
					n.stop(up[rng.IntN(len(up))])
				}
			case r < 12:
				for _, id := range ids {
					if n.nodes[id] == nil {
						n.start(id)
						break
					}
				}
			case r < 16:
				n.cut[ids[rng.IntN(len(ids))]] = true
			case r < 24:
				clear(n.cut)
			case r < 40:
				if l := n.leader(); l != 0 {
					perm := rng.Perm(len(ids))[:1+rng.IntN(4)]
					var next []uint64
					for _, i := range perm {
						next = append(next, ids[i])
					}
					if n.nodes[l].ChangeVoters(next) == nil {
						changes++
					}
				}
			}
		}
		// Heal: everybody up, nothing lost; a leader is elected.
		clear(n.cut)
		n.drop = nil
		for _, id := range ids {
			if n.nodes[id] == nil {
				n.start(id)
			}
		}
		n.run(3000, "a leader after healing (seed "+itoa(seed)+")", func() bool { return n.leader() != 0 })
		if seed == 0 && changes == 0 {
			t.Fatal("seed 0 changed no voters: the test exercises nothing")
		}
	}
}

// A refusal to change the voters now is one the runtime tells apart from
// a bad request: it matches election.ErrVotersRefused, and the dynamic
// membership's absence does not.
func TestVoterRefusals(t *testing.T) {
	for _, err := range []error{ErrNotLeader, ErrVotersChanging} {
		if !errors.Is(err, election.ErrVotersRefused) {
			t.Errorf("%v: not a refusal", err)
		}
	}
	if errors.Is(ErrNotDynamic, election.ErrVotersRefused) {
		t.Errorf("%v: a refusal", ErrNotDynamic)
	}
}
