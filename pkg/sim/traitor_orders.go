package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

// orderLiar is a traitor's part in the agreement on the orders (see
// Traitor.ReceiveOrder): it runs an honest agreement machine of its own
// (its key), fed with the order messages that reach it, and bends its
// output.
type orderLiar struct {
	id          uint64
	cluster     string
	signer      certify.Signer
	keys        certify.Verifier
	members     []uint64
	accomplices []uint64
	m           *agreement.Machine
	rng         *rand.Rand
	heard       []protocol.OrderMessage // for replays, the newest maxKept
	seq         map[uint64]uint64       // term → the last order it issued in it
	out         []protocol.OrderMessage
	lies        int
	// signed are honest members' relays it keeps, for longer than an
	// order lasts, to frame them: the newest maxFramed, by order and path.
	signed map[framedKey]certify.SignedStatement
	order  []framedKey
	framed []certify.Evidence
}

// framedKey is an order and a path.
type framedKey struct {
	term, seq uint64
	path      [protocol.MaxOrderPath]uint64
}

// maxFramed bounds the relays a traitor keeps to frame honest members.
const maxFramed = 1024

// ReceiveOrder hands the traitor an order message that reached it at now
// (its time: the traitor has no clock of its own). It does nothing
// unless TraitorConfig.Orders is set.
func (t *Traitor) ReceiveOrder(now time.Time, om protocol.OrderMessage) {
	l := t.orders
	if l == nil {
		return
	}
	l.heard = keep(l.heard, om)
	l.frame(om)
	l.m.Receive(now, om)
	l.bend(l.m.Ready())
}

// frame keeps the relays of om if they are an honest member's, and
// returns evidence against it when two of them contradict each other
// and hold (what the observer would record). An honest member never
// gives such a pair: the simulator fails if one does.
func (l *orderLiar) frame(om protocol.OrderMessage) {
	if l.keys == nil || slices.Contains(l.accomplices, om.From) {
		return
	}
	digests := make([]*[certify.DigestSize]byte, len(om.Values))
	for _, r := range om.Relays {
		k := framedKey{term: om.Term, seq: om.Seq}
		copy(k.path[:], r.Path)
		if digests[r.Value] == nil {
			d := certify.Digest([]byte(om.Values[r.Value]))
			digests[r.Value] = &d
		}
		prev, ok := l.signed[k]
		if ok && prev.Statement.Digest == *digests[r.Value] {
			continue
		}
		st := certify.SignedStatement{Statement: certify.Statement{Kind: certify.KindRelay, Cluster: l.cluster, Member: om.From,
			Term: om.Term, Order: om.Seq, Path: r.Path, Digest: *digests[r.Value]}, Signature: om.Signatures[r.Signature]}
		if !ok {
			if len(l.order) >= maxFramed {
				delete(l.signed, l.order[0])
				l.order = l.order[1:]
			}
			l.signed[k] = st
			l.order = append(l.order, k)
			continue
		}
		if e := (certify.Evidence{First: prev, Second: st}); certify.VerifyEvidence(l.keys, e) == nil {
			l.framed = append(l.framed, e)
		}
	}
}

// FramedEvidence returns, and forgets, the proofs the traitor assembled
// against members that are not its accomplices, from their own signed
// relays: it would publish them for the observer. Every one that holds
// convicts an honest member, which the simulator fails.
func (t *Traitor) FramedEvidence() []certify.Evidence {
	if t.orders == nil {
		return nil
	}
	e := t.orders.framed
	t.orders.framed = nil
	return e
}

// TickOrders advances the traitor's agreement machine to now and returns
// the order messages it broadcasts: the machine's output, bent (withheld,
// a wrong value relayed to everyone, different values to different
// members along one path, in one message or several, now and then a
// relay whose signature does not hold), and now and then a replay of a
// message it received, its own or another's (verbatim: the signature is
// its sender's).
func (t *Traitor) TickOrders(now time.Time) []protocol.OrderMessage {
	l := t.orders
	if l == nil {
		return nil
	}
	if next, ok := l.m.Next(); ok && !now.Before(next) {
		l.m.Tick(now)
		l.bend(l.m.Ready())
	}
	if len(l.heard) > 0 && l.rng.IntN(50) == 0 {
		l.lies++
		l.out = append(l.out, l.heard[l.rng.IntN(len(l.heard))])
	}
	out := l.out
	l.out = nil
	return out
}

// IssueOrder has the traitor issue, as the leader c certifies (itself),
// its next order of c's term: a different value to different members,
// none to some, in one message or several. Nil if c names another.
func (t *Traitor) IssueOrder(c certify.Certificate) []protocol.OrderMessage {
	l := t.orders
	if l == nil || c.Leader != l.id {
		return nil
	}
	l.seq[c.Term]++
	seq := l.seq[c.Term]
	values := []string{fmt.Sprintf("lie %d/%d a", c.Term, seq), fmt.Sprintf("lie %d/%d b", c.Term, seq), OrderDefault}
	var relays []relayLie
	for _, to := range l.members {
		if to == l.id || l.rng.IntN(8) == 0 {
			continue // withheld
		}
		relays = append(relays, relayLie{to: to, path: []uint64{l.id}, value: values[l.rng.IntN(len(values))]})
	}
	l.lies++
	return l.messages(c.Term, seq, &c, relays)
}

// OrderLies is how many order messages the traitor withheld, bent,
// replayed or issued as a liar.
func (t *Traitor) OrderLies() int {
	if t.orders == nil {
		return 0
	}
	return t.orders.lies
}

// Certificate returns the newest certificate the traitor knows that names
// it as leader (its shadow's, or one it saw), if any.
func (t *Traitor) Certificate() (certify.Certificate, bool) {
	var best certify.Certificate
	found := false
	if cm, ok := t.cfg.Shadow.(Certified); ok {
		if c, held := cm.Certificate(); held && c.Leader == t.cfg.ID {
			best, found = c, true
		}
	}
	for _, c := range t.certs {
		if c.Leader == t.cfg.ID && (!found || c.Term > best.Term) {
			best, found = c, true
		}
	}
	return best, found
}

// relayLie is one relay the liar sends.
type relayLie struct {
	to    uint64
	path  []uint64
	value string
}

// bend sends its machine's output, bent.
func (l *orderLiar) bend(rd agreement.Ready) {
	for _, om := range rd.Messages {
		switch r := l.rng.IntN(8); {
		case r < 2: // withheld
			l.lies++
		case r < 5: // lies about the values
			l.lies++
			wrong := fmt.Sprintf("wrong %d", l.rng.IntN(1000))
			split := l.rng.IntN(2) == 0
			var relays []relayLie
			for _, rel := range om.Relays {
				v := om.Values[rel.Value]
				switch {
				case !split:
					v = wrong // the same wrong value to everyone
				case l.rng.IntN(2) == 0:
					v = []string{wrong, OrderDefault, fmt.Sprintf("other %d", l.rng.IntN(3))}[l.rng.IntN(3)]
				}
				relays = append(relays, relayLie{to: rel.To, path: rel.Path, value: v})
			}
			l.out = append(l.out, l.messages(om.Term, om.Seq, nil, relays)...)
		default:
			l.out = append(l.out, om)
		}
	}
}

// messages are relays, signed with its key (now and then a signature
// that does not hold), in one message or more, each with c.
func (l *orderLiar) messages(term, seq uint64, c *certify.Certificate, relays []relayLie) []protocol.OrderMessage {
	if len(relays) == 0 {
		return nil
	}
	parts := 1 + l.rng.IntN(min(3, len(relays)))
	out := make([]protocol.OrderMessage, parts)
	for i := range out {
		out[i] = protocol.OrderMessage{Cluster: l.cluster, Term: term, Seq: seq, From: l.id, Certificate: c}
	}
	for i, r := range relays {
		om := &out[(i+l.rng.IntN(parts))%parts]
		statement := certify.Relay(l.cluster, term, seq, r.path, []byte(r.value))
		if l.rng.IntN(16) == 0 {
			statement = certify.Relay(l.cluster, term, seq, r.path, []byte("not what it says")) // a bad signature
		}
		s, err := certify.Sign(l.signer, statement)
		if err != nil {
			continue
		}
		vi := slices.Index(om.Values, r.value)
		if vi < 0 {
			vi = len(om.Values)
			om.Values = append(om.Values, r.value)
		}
		om.Relays = append(om.Relays, protocol.OrderRelay{To: r.to, Path: r.path, Value: vi, Signature: len(om.Signatures)})
		om.Signatures = append(om.Signatures, s.Signature)
	}
	return slices.DeleteFunc(out, func(om protocol.OrderMessage) bool { return len(om.Relays) == 0 })
}
