package protocol

import (
	"sync"
	"time"
)

// ReplayWindow is how far behind the newest message of a sender a message
// may arrive, in the sender's own numbering, and still be accepted once.
const ReplayWindow = 256

// ReplayGuard drops messages that are not fresh: a copy of a message
// already received, a message of an earlier incarnation of its sender, and
// a message whose timestamp is further from the receiver's clock than
// MaxAge. Signed messages cannot be altered, so with member keys a captured
// message can be replayed to no node that received it, and to a node that
// did not (one started since) only within MaxAge of when it was sent.
//
// For each sender it keeps the newest incarnation seen and which of the
// last ReplayWindow message numbers of that incarnation have arrived, as
// an IPsec receiver does, so messages that overtake each other on
// different subjects are all accepted once. The first message it accepts
// from a sender (or from a new incarnation of it) is a floor: nothing
// numbered before it is accepted, so messages captured before this
// receiver started cannot be replayed to it. What remains is a replay, to
// a receiver started since, of a message it never heard, sent at most
// MaxAge ago by a sender it has not heard from yet.
//
// No message moves a sender's numbering for good. Where messages are not
// signed, anybody may send one in a member's name numbered far ahead of
// the member's own, which would then all fall behind the window. So once
// every message accepted from a sender's incarnation is dated more than
// MaxAge before the receiver's clock (each is expired by then, so none
// can be accepted again), a message numbered at or behind the newest is
// a new floor, as the first was. The real member is heard again at most
// MaxAge after the newest date a forger gave, which is itself at most
// MaxAge ahead. A sender whose messages are all accepted never gets
// there: each of its later messages is numbered and dated after the
// others. Its memory is bounded by the number of members. It is safe for
// concurrent use.
type ReplayGuard struct {
	maxAge time.Duration

	mu    sync.Mutex
	peers map[uint64]*window
}

// Incarnation is the newest incarnation of sender that the guard has
// accepted a message of, 0 if none.
func (g *ReplayGuard) Incarnation(sender uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.peers[sender]; w != nil {
		return w.inc
	}
	return 0
}

// CheckAddressee drops a point-to-point message captured before its
// receiver started and replayed to it: one not addressed to the receiver's
// incarnation own (addressed to an earlier incarnation, or to none because
// its sender had not heard from the receiver) and dated before the
// receiver started, at started on its clock. Such a message was sent to
// an earlier process. One sent since is accepted: its sender has not heard
// from the new incarnation yet. (A message sent to the receiver's inbox
// just before it started, and delivered after it subscribed, is dropped
// too, as if the network had lost it.) Broadcasts are not checked here:
// the ReplayGuard's floor and MaxAge bound their replays. The reason is
// ReasonReplayed.
func CheckAddressee(m Message, own uint64, started time.Time) error {
	if m.To == 0 || m.ToInc == own {
		return nil
	}
	if m.TS < started.UnixMilli() {
		return reject(ReasonReplayed, "%s from %d for incarnation %d of %d, sent %dms before incarnation %d began",
			m.Type, m.From, m.ToInc, m.To, started.UnixMilli()-m.TS, own)
	}
	return nil
}

// window is what a ReplayGuard knows of one sender.
type window struct {
	inc    uint64
	top    uint64                    // highest N accepted of inc
	seen   [ReplayWindow / 64]uint64 // bit k: top-k arrived
	last   time.Time                 // receiver's clock when a message of inc was last accepted
	newest int64                     // latest TS of a message of inc accepted, in ms
}

// NewReplayGuard returns a guard that accepts messages dated at most maxAge
// before or after the receiver's clock.
func NewReplayGuard(maxAge time.Duration) *ReplayGuard {
	return &ReplayGuard{maxAge: maxAge, peers: make(map[uint64]*window)}
}

// Check accepts m, received at now, at most once: it returns nil and
// remembers m, or a *ValidationError whose reason is ReasonReplayed,
// ReasonExpired or (for a message without freshness fields)
// ReasonInvalidField. Check m only after every other check has passed, so
// that a message dropped for another reason does not take its number.
func (g *ReplayGuard) Check(m Message, now time.Time) error {
	if m.Inc == 0 || m.N == 0 || m.TS <= 0 {
		return reject(ReasonInvalidField, "%s from %d has no incarnation, number or timestamp", m.Type, m.From)
	}
	// The age in milliseconds: both times are positive, so the difference
	// cannot wrap (an age as a time.Duration would saturate for a time
	// centuries ahead, and its negation wrap round to pass the check).
	age, bound := now.UnixMilli()-m.TS, g.maxAge.Milliseconds()
	if age > bound || age < -bound {
		return reject(ReasonExpired, "%s from %d sent %d ms ago, outside ±%v", m.Type, m.From, age, g.maxAge)
	}
	// Incarnations are the senders' wall clocks at start (nanoseconds):
	// one far ahead of this receiver's clock is a lie, which would mute
	// every later incarnation of its sender here.
	if ahead := 2 * g.maxAge; m.Inc > uint64(max(0, now.Add(ahead).UnixNano())) {
		return reject(ReasonInvalidField, "%s from %d of incarnation %d, more than %v ahead of this receiver's clock", m.Type, m.From, m.Inc, ahead)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.peers[m.From]
	// A lower incarnation is a new process whose clock is behind the old
	// one's start (a restart without data on another host), not a replay,
	// once the incarnation it replaces has been silent for twice MaxAge:
	// a message of an even older process was sent before that one started,
	// and is by then older than MaxAge.
	renewed := w != nil && m.Inc < w.inc && now.Sub(w.last) > 2*g.maxAge
	// A message of the same incarnation at or behind the newest number,
	// when everything accepted of it has expired: it is no copy of
	// anything accepted (that would have expired too), so the numbers
	// ahead of it were not the sender's own, or are out of date. Both
	// dates are bounded above, so the difference cannot wrap.
	overtaken := w != nil && m.Inc == w.inc && m.N <= w.top && now.UnixMilli()-w.newest > bound
	switch {
	case w == nil || m.Inc > w.inc || renewed || overtaken:
		// The first message of a sender (or of its new incarnation) is the
		// floor: every earlier number counts as received, so that messages
		// sent before this receiver heard the sender cannot be replayed to
		// it. Only a copy that overtook the very first is lost by this.
		w = &window{inc: m.Inc, top: m.N, last: now, newest: m.TS}
		for i := range w.seen {
			w.seen[i] = ^uint64(0)
		}
		g.peers[m.From] = w
		return nil
	case m.Inc < w.inc:
		return reject(ReasonReplayed, "%s from %d of incarnation %d, which %d replaced", m.Type, m.From, m.Inc, w.inc)
	case m.N > w.top:
		w.shift(m.N - w.top)
		w.top = m.N
		w.seen[0] |= 1
		w.accepted(m, now)
		return nil
	}
	behind := w.top - m.N
	if behind >= ReplayWindow {
		return reject(ReasonReplayed, "%s from %d number %d is %d behind its newest", m.Type, m.From, m.N, behind)
	}
	word, bit := behind/64, behind%64
	if w.seen[word]&(1<<bit) != 0 {
		return reject(ReasonReplayed, "%s from %d number %d already received", m.Type, m.From, m.N)
	}
	w.seen[word] |= 1 << bit
	w.accepted(m, now)
	return nil
}

// accepted records that m, of w's incarnation, was accepted at now.
func (w *window) accepted(m Message, now time.Time) {
	w.last = now
	w.newest = max(w.newest, m.TS)
}

// shift moves the window by k numbers: bit i becomes bit i+k.
func (w *window) shift(k uint64) {
	if k >= ReplayWindow {
		w.seen = [ReplayWindow / 64]uint64{}
		return
	}
	words, b := int(k/64), uint(k%64)
	for i := len(w.seen) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = w.seen[j] << b
			if j > 0 && b > 0 {
				v |= w.seen[j-1] >> (64 - b)
			}
		}
		w.seen[i] = v
	}
}

// Stamp is the sending side: it gives each message of one incarnation its
// freshness fields. It is not safe for concurrent use; the runtime stamps
// from the one goroutine that sends.
type Stamp struct {
	inc uint64
	n   uint64
}

// NewStamp returns the stamp of incarnation inc, which must be positive
// and larger than every earlier incarnation of the same node.
func NewStamp(inc uint64) *Stamp { return &Stamp{inc: inc} }

// Incarnation is the stamp's incarnation.
func (s *Stamp) Incarnation() uint64 { return s.inc }

// Apply sets m's freshness fields for a message sent at now.
func (s *Stamp) Apply(m *Message, now time.Time) {
	s.n++
	m.Inc, m.N, m.TS = s.inc, s.n, now.UnixMilli()
}
