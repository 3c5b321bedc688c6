package natstransport

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/node/transport"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// The beats of a Shared connection (SharedConfig.Beat): the process says
// every Beat that it is alive (protocol.BeatSubject), whatever the number
// of its elections, and follows the beats of the deployment's other
// processes. A member heard beating that falls silent for its time-out
// is reported down to every election of the process (transport.PeerSilent,
// which the machine takes as when its connection closes): the elections a hung process leads fail
// over together, found by one timer instead of one per election.
//
// A member's time-out is the larger of BeatTimeout and three times the
// longest gap between its beats lately (a peak that halves about every
// 70 beats, 7 s at 100 ms), so that a member whose beats arrive
// irregularly, or that was found silent and then beat again (a process
// or a host busy for a while, one starting thousands of elections), gets
// more time: one false alarm fails over every election the member
// leads. It is at most beatCap times BeatTimeout, so that a hang is
// still found within seconds after a busy while. Before
// reporting, the process settles its connection (what its socket holds
// is read first), and a round of its own that comes two intervals late
// reports nobody: the silence was its own.

// DefaultMaxAge is SharedConfig.MaxAge's default: as for the elections'
// messages (natsnode.DefaultMaxMessageAge).
const DefaultMaxAge = 2 * time.Second

// maxBeatMembers bounds the members whose beats a process follows; a
// member beyond it is not followed until another leaves.
const maxBeatMembers = 1024

// beatForget is how long after a member was reported down the process
// forgets it (it left for good); a beat brings it back.
const beatForget = time.Minute

// peakDecay is how much of a member's peak gap remains after each beat,
// and peakFactor how many peaks a member may be silent.
const (
	peakDecay  = 0.99
	peakFactor = 3
)

// beatCap bounds a member's time-out, in BeatTimeouts.
const beatCap = 4

// beatOf is what a process knows of one member's beats.
type beatOf struct {
	arrived time.Time     // when its last beat arrived
	sent    time.Time     // the time its last beat carries
	peak    time.Duration // the longest gap between its beats, decaying
	down    bool          // reported down since its last beat
}

// beats are the beats followed, by member.
type beats struct {
	mu      sync.Mutex
	members map[uint64]*beatOf
}

// beating reports whether the process sends and follows beats.
func (s *Shared) beating() bool { return s.cfg.Beat > 0 }

// beatEvery sends a beat every Beat and reports the members fallen
// silent, until ctx ends.
func (s *Shared) beatEvery(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.Beat)
	defer ticker.Stop()
	s.sendBeat()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		s.sendBeat()
		now := time.Now()
		late := now.Sub(last) > 2*s.cfg.Beat // this process stalled
		last = now
		if !late {
			s.reportSilent(now)
		}
	}
}

// reportSilent reports down the members silent at now (lost). What the
// socket holds counts first. A process that cannot read it within the
// beat time-out is itself behind (reading a thousand elections'
// failover, say): the silence may be its own, and it reports nobody.
func (s *Shared) reportSilent(now time.Time) {
	if len(s.silent(now)) == 0 {
		return
	}
	if !settleWithin(s.nc, s.log, s.cfg.BeatTimeout) {
		s.log.Debug("members silent, but this process is behind on its connection: nobody reported")
		return
	}
	s.drained()
	for _, id := range s.silent(time.Now()) {
		s.lost(id)
	}
}

// sendBeat publishes this process's beat, signed with the signer.
func (s *Shared) sendBeat() {
	out := &nats.Msg{Subject: protocol.BeatSubject(s.cfg.Conn), Data: protocol.AppendBeat(nil, protocol.Beat{From: s.cfg.ID, Sent: time.Now()})}
	if s.cfg.Signer != nil {
		out.Header = s.cfg.Signer.Header(out.Subject, out.Data)
	}
	if err := s.nc.PublishMsg(out); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Debug("publish a beat", "err", err)
	}
}

// onBeat records a member's beat: one that decodes, not this process's,
// signed by the member it names (with keys), dated within MaxAge of this
// process's clock and later than the member's last.
func (s *Shared) onBeat(msg *nats.Msg) {
	b, err := protocol.ReadBeat(msg.Data)
	if err != nil {
		s.beatsRefused.Add(1)
		s.log.Debug("beat dropped", "err", err)
		return
	}
	if b.From == s.cfg.ID {
		return
	}
	if s.cfg.Keys != nil {
		signer, err := s.cfg.Keys.Verify(msg.Subject, msg.Data, msg.Header)
		if err == nil {
			err = signing.CheckSigner(signer, b.From)
		}
		if err != nil {
			s.beatsRefused.Add(1)
			s.log.Debug("beat dropped", "member", b.From, "reason", protocol.ReasonOf(err), "err", err)
			return
		}
	}
	now := time.Now()
	age := now.Sub(b.Sent)
	if age < -s.cfg.MaxAge {
		s.beatsRefused.Add(1)
		s.log.Debug("beat dropped: from the future", "member", b.From, "age", age)
		return
	}
	s.beats.mu.Lock()
	m := s.beats.members[b.From]
	back := m == nil || m.down
	if age > s.cfg.MaxAge && back {
		// An old beat neither makes a member followed nor brings one back.
		// Of a member followed, it is a sign of life that came late: this
		// process's own socket, or the server, held it (a process that
		// reads a thousand elections' messages at once, say), and refusing
		// it would take that lateness for the member's silence.
		s.beats.mu.Unlock()
		s.beatsRefused.Add(1)
		s.log.Debug("beat dropped: out of date", "member", b.From, "age", age)
		return
	}
	switch {
	case m == nil && len(s.beats.members) >= maxBeatMembers:
		s.beats.mu.Unlock()
		return
	case m == nil:
		m = &beatOf{}
		s.beats.members[b.From] = m
	case !b.Sent.After(m.sent):
		s.beats.mu.Unlock()
		s.beatsRefused.Add(1) // replayed, or overtaken
		return
	default:
		m.peak = max(now.Sub(m.arrived), time.Duration(float64(m.peak)*peakDecay))
	}
	if m.down {
		s.log.Info("member beating again", "member", b.From)
	}
	m.arrived, m.sent, m.down = now, b.Sent, false
	s.beats.mu.Unlock()
	if back {
		s.back(b.From)
	}
}

// back tells every open election that member id may have missed what
// it sent (transport.PeerBack): a leader claims again at once. id is a
// member heard beating for the first time or again, or this process
// when its connection came back.
func (s *Shared) back(id uint64) { s.tell(transport.PeerBack, id) }

// tell hands every open election an event of kind about member id (or
// this process), and returns how many elections are open.
func (s *Shared) tell(kind transport.Kind, id uint64) int {
	s.mu.RLock()
	adapters := make([]*Adapter, 0, len(s.clusters))
	for _, a := range s.clusters {
		adapters = append(adapters, a)
	}
	s.mu.RUnlock()
	leadFirst(adapters, id, func(a *Adapter) { a.peerEvent(kind, id) })
	return len(adapters)
}

// yieldEvery is how many elections leadFirst tells between two yields.
const yieldEvery = 32

// leadFirst calls tell for every adapter of adapters about member id
// going down (or coming back): first for those whose election id led
// (Adapter.claimer), then for the others, yielding the processor
// before them and after every yieldEvery of them. The elections that
// lose their leader thus run their failover, and share its state
// writes, before a thousand others handle the news, instead of after
// them where the process has one P (GOMAXPROCS=1). Each election still
// takes the events about one member in the order they happened.
func leadFirst(adapters []*Adapter, id uint64, tell func(*Adapter)) {
	rest := adapters[:0:0]
	led := 0
	for _, a := range adapters {
		if a.claimer.Load() == id {
			tell(a)
			led++
		} else {
			rest = append(rest, a)
		}
	}
	for i, a := range rest {
		if led > 0 && i%yieldEvery == 0 {
			runtime.Gosched()
		}
		tell(a)
	}
}

// disconnected records that member id's connection closed (a connection
// event): its next beat counts as its return (back), whether or not its
// beats stopped meanwhile.
func (s *Shared) disconnected(id uint64) {
	s.beats.mu.Lock()
	defer s.beats.mu.Unlock()
	if m := s.beats.members[id]; m != nil {
		m.down = true
	}
}

// reconnections tells every election, each time the connection comes
// back after it was lost, that this process may have missed what the
// others sent (back), until ctx ends.
func (s *Shared) reconnections(ctx context.Context, connected chan nats.Status) {
	defer s.nc.RemoveStatusListener(connected)
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-connected:
			if !ok {
				return
			}
			s.log.Info("connection back: the elections this process leads claim again")
			s.back(s.cfg.ID)
		}
	}
}

// silent returns the members not reported down whose last beat is older
// than their time-out at now, and forgets those reported down long ago.
func (s *Shared) silent(now time.Time) []uint64 {
	s.beats.mu.Lock()
	defer s.beats.mu.Unlock()
	var ids []uint64
	for id, m := range s.beats.members {
		quiet := now.Sub(m.arrived)
		switch {
		case m.down && quiet > beatForget:
			delete(s.beats.members, id)
		case !m.down && quiet > min(beatCap*s.cfg.BeatTimeout, max(s.cfg.BeatTimeout, peakFactor*m.peak)):
			ids = append(ids, id)
		}
	}
	return ids
}

// lost reports member id down to every open election, unless a beat
// arrived meanwhile.
func (s *Shared) lost(id uint64) {
	s.beats.mu.Lock()
	m := s.beats.members[id]
	if m == nil || m.down {
		s.beats.mu.Unlock()
		return
	}
	m.down = true
	quiet := time.Since(m.arrived)
	s.beats.mu.Unlock()
	s.beatsLost.Add(1)
	n := s.tell(transport.PeerSilent, id)
	s.log.Info("member silent: its elections are told it is down", "member", id, "silent", quiet.Round(time.Millisecond), "elections", n)
}

// Beats is how many members this process found silent (each reported
// down to every election), and how many beats it dropped.
func (s *Shared) Beats() (lost, refused uint64) { return s.beatsLost.Load(), s.beatsRefused.Load() }

// BeatsFollowed is how many members' beats this process follows: heard
// beating, and not reported down since.
func (s *Shared) BeatsFollowed() int {
	s.beats.mu.Lock()
	defer s.beats.mu.Unlock()
	n := 0
	for _, m := range s.beats.members {
		if !m.down {
			n++
		}
	}
	return n
}

// peerEvent tells the machine of an event of kind about member id, if it
// is a member of the election, or about this process: that id fell
// silent (PeerSilent, as a closed connection does) or is back
// (PeerBack). The beats never name this process as silent.
func (a *Adapter) peerEvent(kind transport.Kind, id uint64) {
	if a.stopping.Load() || a.lanes == nil || id != a.cfg.ID && !a.isMember(id) {
		return
	}
	a.lanes.Deliver(transport.Inbound{Kind: kind, Peer: id, At: time.Now()})
}
