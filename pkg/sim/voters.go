package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-election/baton/pkg/driver"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Voters that change: Paxos with dynamic membership in the churn runs
// (ChurnSpec.Voters). The machines are given a voter set drawn at setup
// (election.Config.Voters, version 0); the node that leads is asked now
// and then, through its driver (Cluster.Do), to move them elsewhere
// (paxos.Machine.ChangeVoters), and each settle first restores a quorum
// of the newest configuration a running node holds.

// voterChanger is a machine whose voters change through the protocol
// (paxos.Machine).
type voterChanger interface {
	voting
	ChangeVoters(voters []uint64) error
}

// errNoVoters is what a change of the voters returns on a machine that has
// none to change.
var errNoVoters = errors.New("sim: the machine has no voters to change")

// voterLog is the check that follows the voter configurations the nodes
// store: the joint ones (a change begun) and the others of a version
// above 0 (a change completed), each version counted once.
type voterLog struct {
	noCheck
	// joint holds, per version, the leaders that proposed a joint
	// configuration of it (the owners of its ballots); done, per version,
	// the leader that proposed the first configuration of it stored that
	// is not joint.
	joint map[uint64][]uint64
	done  map[uint64]uint64
}

func newVoterLog() *voterLog {
	return &voterLog{joint: map[uint64][]uint64{}, done: map[uint64]uint64{}}
}

func (l *voterLog) stepped(_ *node, s driver.Step) {
	st := s.Ready.State
	if st == nil || st.Voters == nil || st.Voters.Version == 0 {
		return
	}
	v := st.Voters
	by := owner(v.Ballot)
	switch _, ok := l.done[v.Version]; {
	case v.Joint() && !slices.Contains(l.joint[v.Version], by):
		l.joint[v.Version] = append(l.joint[v.Version], by)
	case !v.Joint() && !ok:
		l.done[v.Version] = by
	}
}

// owner is the member that owns term t (protocol.MaxMemberID).
func owner(t uint64) uint64 { return (t-1)%protocol.MaxMemberID + 1 }

// successors is how many changes a leader completed that another began:
// it found itself under a joint configuration that it did not propose.
func (l *voterLog) successors() int {
	k := 0
	for v, by := range l.done {
		if began := l.joint[v-1]; len(began) > 0 && !slices.Contains(began, by) {
			k++
		}
	}
	return k
}

// sameVoters reports whether a and b are one configuration.
func sameVoters(a, b *protocol.Voters) bool {
	return a.Version == b.Version && a.Ballot == b.Ballot && slices.Equal(a.Voters, b.Voters) && slices.Equal(a.Next, b.Next)
}

// leading is the running node, not paused, that is in role Leader, or 0.
func (ch *churnRun) leading() uint64 {
	for _, id := range ch.c.Running() {
		if s, _ := ch.c.Status(id); s.Role == election.Leader && !ch.c.Paused(id) {
			return id
		}
	}
	return 0
}

// changeVoters asks the node that leads, if one does, to move the voters
// to 1 to 5 IDs drawn among the running nodes, or, in a quarter of the
// changes, among every ID (some of which may not run: the change then
// waits for them, and a settle starts them). It returns the new voters
// once the leader began the change, or nil.
func (ch *churnRun) changeVoters() []uint64 {
	leader := ch.leading()
	if leader == 0 {
		return nil
	}
	pool := ch.c.Running()
	if ch.rng.IntN(4) == 0 {
		pool = ch.ids
	}
	next := make([]uint64, 0, 5)
	for _, i := range ch.rng.Perm(len(pool))[:min(1+ch.rng.IntN(5), len(pool))] {
		next = append(next, pool[i])
	}
	slices.Sort(next)
	err := ch.c.Do(leader, func(m election.Machine) error {
		vc, ok := m.(voterChanger)
		if !ok {
			return errNoVoters
		}
		return vc.ChangeVoters(next)
	})
	v, _ := ch.c.VotersOf(leader)
	switch {
	case err != nil:
		ch.res.Refused++
		ch.logf("%d refuses to move the voters to %v: %v", leader, next, err)
		return nil
	case v == nil || !v.Joint():
		ch.logf("%d is asked to move the voters to %v, which they are", leader, next)
		return nil
	}
	ch.res.Changes++
	for _, id := range next {
		if !ch.c.Up(id) {
			ch.res.Absent++
			break
		}
	}
	ch.logf("%d moves the voters to %v: %s", leader, next, votersString(v))
	return next
}

// newestVoters is the newest voter configuration a running node holds, or
// nil.
func (ch *churnRun) newestVoters() *protocol.Voters {
	var newest *protocol.Voters
	for _, id := range ch.c.Running() {
		if v, ok := ch.c.VotersOf(id); ok && v.Newer(newest) {
			newest = v
		}
	}
	return newest
}

// restoreVoters starts, at random, voters of the newest configuration a
// running node holds that do not run, until a quorum of it runs (of both
// sets while it is joint). A voter that ran before comes back with its
// disk, which may hold a newer configuration: the newest is taken again
// after each start. When MaxPresent nodes run, a node that neither votes
// in it nor leads first resigns to make room.
func (ch *churnRun) restoreVoters() {
	for range MaxChurnID {
		v := ch.newestVoters()
		if v == nil || v.Quorate(ch.c.Running()) {
			return
		}
		var down []uint64
		for _, id := range ch.ids {
			if v.Votes(id) && !ch.c.Up(id) {
				down = append(down, id)
			}
		}
		id := down[ch.rng.IntN(len(down))]
		if ch.running() >= MaxPresent {
			ch.makeRoom(v)
		}
		delete(ch.crashed, id)
		delete(ch.startAt, id)
		ch.res.Restored++
		ch.logf("%d starts: a voter of %s", id, votersString(v))
		ch.start(id)
	}
}

// makeRoom makes a running node that neither votes in v nor leads resign.
func (ch *churnRun) makeRoom(v *protocol.Voters) {
	var can []uint64
	for _, id := range ch.c.Running() {
		if s, _ := ch.c.Status(id); !v.Votes(id) && s.Role != election.Leader && id != ch.leader && !ch.c.Paused(id) {
			can = append(can, id)
		}
	}
	if len(can) == 0 {
		return
	}
	id := can[ch.rng.IntN(len(can))]
	ch.res.Resigns++
	ch.logf("%d resigns to make room for a voter", id)
	ch.c.Resign(id)
}

// mayWipe reports whether node id may lose its disk, in a run of
// ChurnSpec.Voters, within the fault model (docs/fault-model.md: the
// disks of a majority of the voters are not lost at once): in each set
// of the newest configuration any disk holds (the voters given at setup
// if none holds one) that id belongs to, a majority of the voters other
// than id keep that configuration on their disks. Without it, a node
// starts from the voters given at setup, and a majority of them would
// forget the change.
func (ch *churnRun) mayWipe(id uint64) bool {
	newest := &protocol.Voters{Voters: ch.res.Voters}
	for _, n := range ch.c.nodes {
		if n.disk != nil && n.disk.Voters.Newer(newest) {
			newest = n.disk.Voters
		}
	}
	var keep []uint64
	for _, n := range ch.c.nodes {
		if n.id == id || n.disk == nil {
			continue
		}
		if v := n.disk.Voters; v == nil && newest.Version == 0 || v != nil && sameVoters(v, newest) {
			keep = append(keep, n.id)
		}
	}
	for _, set := range [][]uint64{newest.Voters, newest.Next} {
		if slices.Contains(set, id) && !(&protocol.Voters{Voters: set}).Quorate(keep) {
			return false
		}
	}
	return true
}

// votersAgree reports whether every running node holds one voter
// configuration, not joint, and, once a run of Only changed the voters,
// with the voters it asked for.
func (ch *churnRun) votersAgree() bool {
	var first *protocol.Voters
	for _, id := range ch.c.Running() {
		v, ok := ch.c.VotersOf(id)
		switch {
		case !ok || v.Joint():
			return false
		case first == nil:
			first = v
		case !sameVoters(first, v):
			return false
		}
	}
	return first == nil || ch.target == nil || slices.Equal(first.Voters, ch.target)
}

// votersString shows a voter configuration.
func votersString(v *protocol.Voters) string {
	if v == nil {
		return "none"
	}
	s := fmt.Sprintf("v%d/%d %v", v.Version, v.Ballot, v.Voters)
	if v.Joint() {
		s += fmt.Sprintf("→%v", v.Next)
	}
	return s
}

// heldString shows the configurations a node held.
func heldString(held []*protocol.Voters) string {
	s := make([]string, len(held))
	for i, v := range held {
		s[i] = votersString(v)
	}
	return strings.Join(s, ", ")
}

// describeVoters shows the configuration each running node holds.
func (ch *churnRun) describeVoters() string {
	var b strings.Builder
	for _, id := range ch.c.Running() {
		v, _ := ch.c.VotersOf(id)
		fmt.Fprintf(&b, " [%d: %s]", id, votersString(v))
	}
	return b.String()
}
