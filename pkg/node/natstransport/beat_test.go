package natstransport

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// beatShared is a Shared of member 1 that follows beats, not started.
func beatShared(t *testing.T, signer *signing.Signer, keys *signing.MemberKeys) *Shared {
	t.Helper()
	s, err := NewShared(&nats.Conn{}, SharedConfig{Conn: "shard-0", ID: 1, Beat: 100 * time.Millisecond, BeatTimeout: 200 * time.Millisecond,
		Signer: signer, Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// beatMsg is member from's beat, sent at sent, signed by signer if not nil.
func beatMsg(from uint64, sent time.Time, signer *signing.Signer) *nats.Msg {
	m := &nats.Msg{Subject: protocol.BeatSubject("shard-0"), Data: protocol.AppendBeat(nil, protocol.Beat{From: from, Sent: sent})}
	if signer != nil {
		m.Header = signer.Header(m.Subject, m.Data)
	}
	return m
}

// A member is followed from its first beat, and silent once its beats
// stop for the time-out; a member heard irregularly gets twice its
// longest gap lately.
func TestBeatsSilent(t *testing.T) {
	s := beatShared(t, nil, nil)
	now := time.Now()
	if got := s.silent(now.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("members never heard are silent: %v", got)
	}
	s.onBeat(beatMsg(2, now, nil))
	s.onBeat(beatMsg(3, now, nil))
	s.onBeat(beatMsg(1, now, nil)) // its own: not followed
	heard := s.beats.members[2].arrived
	if got := s.silent(heard.Add(150 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("silent within the time-out: %v", got)
	}
	got := s.silent(heard.Add(time.Second))
	slices.Sort(got)
	if !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("silent after a second: %v, want [2 3]", got)
	}
	// A gap of 200 ms raises member 2's time-out to about 600 ms.
	s.beats.members[2].arrived = time.Now().Add(-200 * time.Millisecond)
	s.onBeat(beatMsg(2, now.Add(time.Millisecond), nil))
	heard = s.beats.members[2].arrived
	if got := s.silent(heard.Add(550 * time.Millisecond)); slices.Contains(got, 2) {
		t.Errorf("member 2, whose beats came 200 ms apart, silent after 550 ms")
	}
	if got := s.silent(heard.Add(650 * time.Millisecond)); !slices.Contains(got, 2) {
		t.Errorf("member 2 not silent after 650 ms: %v", got)
	}
	// A gap of 5 s: the time-out stops at 4 time-outs, 800 ms.
	s.beats.members[2].arrived = time.Now().Add(-5 * time.Second)
	s.onBeat(beatMsg(2, now.Add(2*time.Millisecond), nil))
	heard = s.beats.members[2].arrived
	if got := s.silent(heard.Add(700 * time.Millisecond)); slices.Contains(got, 2) {
		t.Errorf("member 2 silent after 700 ms, below the time-out's cap")
	}
	if got := s.silent(heard.Add(900 * time.Millisecond)); !slices.Contains(got, 2) {
		t.Errorf("member 2, whose beats came 5 s apart, not silent after 900 ms: the time-out has no cap")
	}
	// Reported down once; forgotten a while later; back with a beat.
	if n := s.BeatsFollowed(); n != 2 {
		t.Errorf("%d members followed, want 2", n)
	}
	s.lost(3)
	s.lost(3)
	if lost, _ := s.Beats(); lost != 1 {
		t.Errorf("member 3 reported down %d times, want once", lost)
	}
	if n := s.BeatsFollowed(); n != 1 {
		t.Errorf("%d members followed once member 3 was reported down, want 1", n)
	}
	if got := s.silent(time.Now().Add(time.Second)); slices.Contains(got, 3) {
		t.Error("a member reported down is silent again")
	}
	s.silent(time.Now().Add(2 * beatForget))
	if _, ok := s.beats.members[3]; ok {
		t.Error("a member down for long is still followed")
	}
	s.onBeat(beatMsg(3, time.Now(), nil))
	if m := s.beats.members[3]; m == nil || m.down {
		t.Errorf("member 3 beating again: %+v", m)
	}
}

// Beats that do not hold are dropped: undecodable, out of date (of a
// member not followed), from the future, replayed, and with keys,
// unsigned or signed by another member than they name.
func TestBeatsRefused(t *testing.T) {
	signers := map[uint64]*signing.Signer{}
	public := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		if signers[id], err = signing.NewSigner(id, kp); err != nil {
			t.Fatal(err)
		}
		public[id] = signers[id].PublicKey()
	}
	keys, err := signing.NewMemberKeys(public)
	if err != nil {
		t.Fatal(err)
	}
	s := beatShared(t, signers[1], keys)
	now := time.Now()
	for name, m := range map[string]*nats.Msg{
		"undecodable":     {Subject: protocol.BeatSubject("shard-0"), Data: []byte{9, 9}},
		"unsigned":        beatMsg(2, now, nil),
		"forged":          beatMsg(2, now, signers[3]),
		"too old":         beatMsg(2, now.Add(-time.Minute), signers[2]),
		"from the future": beatMsg(2, now.Add(time.Minute), signers[2]),
	} {
		before := len(s.beats.members)
		s.onBeat(m)
		if len(s.beats.members) != before {
			t.Errorf("%s: beat followed", name)
		}
	}
	if _, refused := s.Beats(); refused != 5 {
		t.Errorf("%d beats counted as dropped, want 5", refused)
	}
	s.onBeat(beatMsg(2, now, signers[2]))
	first := s.beats.members[2]
	if first == nil {
		t.Fatal("member 2's own beat not followed")
	}
	arrived := first.arrived
	s.onBeat(beatMsg(2, now, signers[2])) // the same again
	if _, refused := s.Beats(); refused != 6 {
		t.Errorf("a replayed beat not counted as dropped")
	}
	if s.beats.members[2].arrived != arrived {
		t.Error("a replayed beat counted")
	}
}

// The members followed are bounded.
func TestBeatsBounded(t *testing.T) {
	s := beatShared(t, nil, nil)
	now := time.Now()
	for id := uint64(2); id < maxBeatMembers+100; id++ {
		s.onBeat(beatMsg(id, now, nil))
	}
	if n := len(s.beats.members); n != maxBeatMembers {
		t.Errorf("%d members followed, at most %d", n, maxBeatMembers)
	}
}

// A member's first beat, and its first beat after it fell silent or its
// connection closed, tells every election of which it is a member that
// it is back (transport.PeerBack); its other beats do not.
func TestBeatsBack(t *testing.T) {
	s := beatShared(t, nil, nil)
	meter := newCountingMeter()
	member := &Adapter{cfg: Config{Cluster: "shard-0", ID: 1, Members: []uint64{1, 2}}, lanes: transport.NewLanes(8, meter)}
	other := &Adapter{cfg: Config{Cluster: "shard-1", ID: 1, Members: []uint64{1, 3}}, lanes: transport.NewLanes(8, meter)}
	s.clusters[member.cfg.Cluster], s.clusters[other.cfg.Cluster] = member, other
	backs := func(a *Adapter) []uint64 {
		var ids []uint64
		for {
			in, _, ok := a.lanes.Next()
			if !ok {
				return ids
			}
			if in.Kind != transport.PeerBack {
				t.Fatalf("%s: got %+v, want only PeerBack", a.cfg.Cluster, in)
			}
			ids = append(ids, in.Peer)
		}
	}
	now := time.Now()
	s.onBeat(beatMsg(2, now, nil))
	if got := backs(member); !slices.Equal(got, []uint64{2}) {
		t.Errorf("member 2's first beat: %v back in shard-0, want [2]", got)
	}
	if got := backs(other); len(got) != 0 {
		t.Errorf("member 2's first beat: %v back in shard-1, of which it is no member", got)
	}
	s.onBeat(beatMsg(2, now.Add(time.Millisecond), nil))
	if got := backs(member); len(got) != 0 {
		t.Errorf("member 2's second beat: %v back, want none", got)
	}
	s.lost(2)
	if in, claim, ok := member.lanes.Next(); !ok || !claim || in.Kind != transport.PeerSilent {
		t.Fatalf("after member 2 fell silent: %+v (%t), want PeerSilent on the claims lane", in, ok)
	}
	s.onBeat(beatMsg(2, now.Add(2*time.Millisecond), nil))
	if got := backs(member); !slices.Equal(got, []uint64{2}) {
		t.Errorf("member 2 beating after it fell silent: %v back, want [2]", got)
	}
	s.disconnected(2)
	s.onBeat(beatMsg(2, now.Add(3*time.Millisecond), nil))
	if got := backs(member); !slices.Equal(got, []uint64{2}) {
		t.Errorf("member 2 beating after its connection closed: %v back, want [2]", got)
	}
	s.back(1) // this process's connection came back
	if got0, got1 := backs(member), backs(other); !slices.Equal(got0, []uint64{1}) || !slices.Equal(got1, []uint64{1}) {
		t.Errorf("this process back: %v in shard-0 and %v in shard-1, want [1] in each", got0, got1)
	}
}

// A late beat of a member followed, newer than its last, is a sign of
// life: this process read it late, and its silence is not the member's.
// An old beat does not bring back a member reported down.
func TestLateBeats(t *testing.T) {
	s := beatShared(t, nil, nil)
	now := time.Now()
	s.onBeat(beatMsg(2, now.Add(-10*time.Second), nil))
	if s.beats.members[2] != nil {
		t.Fatal("an old beat made member 2 followed")
	}
	s.onBeat(beatMsg(2, now.Add(-time.Second), nil))
	m := s.beats.members[2]
	if m == nil {
		t.Fatal("member 2 not followed")
	}
	arrived := m.arrived
	s.onBeat(beatMsg(2, now.Add(-5*time.Second), nil)) // older than its last: a replay
	if !m.arrived.Equal(arrived) {
		t.Error("a beat older than the member's last counted")
	}
	// Its last beat was sent a while ago; the next comes late.
	m.sent = now.Add(-time.Minute)
	late := now.Add(-500 * time.Millisecond).Add(-s.cfg.MaxAge)
	s.onBeat(beatMsg(2, late, nil))
	if m.sent.UnixMilli() != late.UnixMilli() || !m.arrived.After(arrived) {
		t.Errorf("a late beat, newer than the last: sent %v, arrived %v; want %v and after %v", m.sent, m.arrived, late, arrived)
	}
	m.down = true
	s.onBeat(beatMsg(2, late.Add(time.Millisecond), nil))
	if !m.down {
		t.Error("a late beat brought member 2 back")
	}
}

// A process that cannot read its connection in time reports no member
// silent: the silence may be its own.
func TestBeatsNotReportedWhenBehind(t *testing.T) {
	nc := batontest.Connect(t, batontest.StartNATS(t))
	s, err := NewShared(nc, SharedConfig{Conn: "shard-0", ID: 1, Beat: 100 * time.Millisecond, BeatTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close() // no flush can be answered now
	s.onBeat(beatMsg(2, time.Now(), nil))
	s.beats.members[2].arrived = time.Now().Add(-time.Minute)
	s.reportSilent(time.Now())
	if m := s.beats.members[2]; m.down {
		t.Error("member 2 reported down by a process that could not read its connection")
	}
	if lost, _ := s.Beats(); lost != 0 {
		t.Errorf("%d members reported down, want 0", lost)
	}
}

// A member going down is told first to the elections it led, then to the
// others, each once, in the order given within each part.
func TestLeadFirst(t *testing.T) {
	var adapters []*Adapter
	for i := range 100 {
		a := &Adapter{cfg: Config{Cluster: fmt.Sprintf("shard-%d", i)}}
		if i%7 == 3 {
			a.claimer.Store(5)
		} else if i%7 == 4 {
			a.claimer.Store(6)
		}
		adapters = append(adapters, a)
	}
	var order []*Adapter
	leadFirst(slices.Clone(adapters), 5, func(a *Adapter) { order = append(order, a) })
	if len(order) != len(adapters) {
		t.Fatalf("told %d elections, want %d", len(order), len(adapters))
	}
	led := 0
	for _, a := range adapters {
		if a.claimer.Load() == 5 {
			led++
		}
	}
	for i, a := range order {
		if (i < led) != (a.claimer.Load() == 5) {
			t.Fatalf("told %s (led by %d) at %d, with %d elections led by 5 to tell first", a.cfg.Cluster, a.claimer.Load(), i, led)
		}
	}
	want := slices.DeleteFunc(slices.Clone(adapters), func(a *Adapter) bool { return a.claimer.Load() == 5 })
	if !slices.Equal(order[led:], want) {
		t.Error("the elections 5 did not lead were told out of their order")
	}
}

// An election's claimer is the sender of the last claim it took.
func TestClaimer(t *testing.T) {
	a := &Adapter{cfg: Config{Cluster: "shard-0", ID: 1, Members: []uint64{1, 2, 3}}, lanes: transport.NewLanes(8, newCountingMeter())}
	a.take(protocol.Message{Type: protocol.TypeHeartbeat, From: 2, Term: 2}, nil, "election.shard-0.heartbeat")
	a.take(protocol.Message{Type: protocol.TypeElection, From: 3, Term: 2}, nil, "election.shard-0.election")
	if got := a.claimer.Load(); got != 2 {
		t.Errorf("claimer after a heartbeat of 2 and an Election of 3: %d, want 2", got)
	}
	a.take(protocol.Message{Type: protocol.TypeCoordinator, From: 3, Term: 3}, nil, "election.shard-0.coordinator")
	if got := a.claimer.Load(); got != 3 {
		t.Errorf("claimer after a Coordinator of 3: %d, want 3", got)
	}
}
