package leader

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// DecidedOrder is an order of a byzantine cluster's leader that f+1
// members decided alike (package orders runs the agreement).
type DecidedOrder struct {
	Cluster string
	// Term is the term of the leader that issued the order, Seq its
	// number among the orders of that term.
	Term, Seq uint64
	// Value is the decided value.
	Value string
	// Members are the f+1 members whose signed decisions made it, in
	// increasing order.
	Members []uint64
}

const (
	// ordersInbox bounds the decisions waiting for the consumer of
	// Orders; a decision that finds it full is dropped (WithRejected
	// hears of it).
	ordersInbox = 1024
	// maxVotesPerMember bounds the decisions of one member that count
	// toward orders not yet yielded: a liar that signs decisions of
	// orders nobody issued pushes out only its own.
	maxVotesPerMember = 64
	// maxYielded bounds the orders remembered as yielded; once it is
	// exceeded, orders no greater than the least forgotten one are
	// ignored, so that a replay never yields an order twice.
	maxYielded = 1024
)

// MaxDecisionAge bounds how far a decision's date (protocol.Decision.At)
// may be from the reader's clock, either way, for Orders to count it: the
// members publish a decision as they make it, so an older one is a
// replay (a new reader would otherwise take a replayed set of f+1 old
// decisions for an order just decided), and the bound leaves room for
// the clocks of the members and the reader to disagree.
const MaxDecisionAge = 5 * time.Second

type decisionKey struct{ term, seq uint64 }

func (a decisionKey) less(b decisionKey) bool {
	return a.term < b.term || (a.term == b.term && a.seq < b.seq)
}

// Orders yields the orders of cluster's leaders as their agreement is
// decided: an order is yielded once f+1 distinct members, f =
// ⌊(N−1)/3⌋ of the N members of WithKeys's keys, have published on
// protocol.DecidedSubject, each signed with its own key, the same value
// for it, so that at least one of them is honest and the value is that
// of every honest member (IC1); a liar alone cannot fake one. Each order
// is yielded at most once, in the order its f+1-th decision arrives,
// until ctx ends or the loop stops. Orders needs WithKeys (without, it
// yields an error wrapping ErrNeedKeys); decisions with a bad signature,
// of a non-member or another cluster, are dropped and reported to
// WithRejected's function. It yields ErrConnectionClosed, and ends, when
// the connection closes for good.
//
// Decisions travel over core NATS: an order decided while the
// subscriber is disconnected, or before Orders subscribed, is not seen.
// Each decision is dated by its member and counts only within
// MaxDecisionAge of the reader's clock, so that a replay of old
// decisions is not yielded as an order just decided.
func Orders(ctx context.Context, nc *nats.Conn, cluster string, opts ...Option) iter.Seq2[DecidedOrder, error] {
	o := newOptions(opts)
	return func(yield func(DecidedOrder, error) bool) {
		if err := protocol.ValidateCluster(cluster); err != nil {
			yield(DecidedOrder{}, fmt.Errorf("leader: %w", err))
			return
		}
		if o.keys == nil || o.keys.Len() == 0 {
			yield(DecidedOrder{}, fmt.Errorf("leader: orders of cluster %s: %w (use WithKeys)", cluster, ErrNeedKeys))
			return
		}
		closed := nc.StatusChanged(nats.CLOSED)
		defer nc.RemoveStatusListener(closed)
		if nc.IsClosed() {
			yield(DecidedOrder{}, ErrConnectionClosed)
			return
		}
		inbox := make(chan protocol.Decision, ordersInbox)
		subject := protocol.DecidedSubject(cluster)
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
			d, err := readDecision(o.keys, cluster, m, time.Now())
			if err == nil {
				select {
				case inbox <- d:
					return
				default:
					err = fmt.Errorf("leader: decision of member %d on order %d/%d dropped: %d waiting", d.Member, d.Term, d.Seq, ordersInbox)
				}
			}
			if o.rejected != nil {
				o.rejected(err)
			}
		})
		if err != nil {
			yield(DecidedOrder{}, fmt.Errorf("leader: subscribe: %w", err))
			return
		}
		defer sub.Unsubscribe()

		t := newTally(certify.F(o.keys.Len()) + 1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-closed:
				yield(DecidedOrder{}, ErrConnectionClosed)
				return
			case d := <-inbox:
				if order, ok := t.add(d); ok && !yield(order, nil) {
					return
				}
			}
		}
	}
}

// readDecision decodes and checks a decision received for cluster at
// now: the signature of a member of keys, who must be the decision's
// Member, and a date within MaxDecisionAge of now.
func readDecision(keys *signing.MemberKeys, cluster string, m *nats.Msg, now time.Time) (protocol.Decision, error) {
	if len(m.Data) > protocol.MaxDecision {
		return protocol.Decision{}, fmt.Errorf("leader: decision of %d bytes exceeds %d", len(m.Data), protocol.MaxDecision)
	}
	signer, err := keys.Verify(m.Subject, m.Data, m.Header)
	if err != nil {
		return protocol.Decision{}, fmt.Errorf("leader: decision: %w", err)
	}
	d, err := protocol.DecodeDecision(m.Data)
	if err != nil {
		return protocol.Decision{}, fmt.Errorf("leader: %w", err)
	}
	if err := signing.CheckSigner(signer, d.Member); err != nil {
		return protocol.Decision{}, fmt.Errorf("leader: decision: %w", err)
	}
	if d.Cluster != cluster {
		return protocol.Decision{}, fmt.Errorf("leader: decision of cluster %q on the subject of %q", d.Cluster, cluster)
	}
	if d.At.IsZero() {
		return protocol.Decision{}, fmt.Errorf("leader: decision of member %d on order %d/%d is not dated", d.Member, d.Term, d.Seq)
	}
	if age := now.Sub(d.At.Time); age > MaxDecisionAge || age < -MaxDecisionAge {
		return protocol.Decision{}, fmt.Errorf("leader: decision of member %d on order %d/%d is dated %v from now, beyond %v: a replay, or clocks that disagree",
			d.Member, d.Term, d.Seq, age.Round(time.Millisecond), MaxDecisionAge)
	}
	return d, nil
}

// tally counts the members' decisions until f+1 agree. It is the pure
// part of Orders.
type tally struct {
	need    int
	orders  map[decisionKey]map[string][]uint64 // order → value → members
	votes   map[uint64][]decisionKey            // member → orders it counts toward, oldest first
	yielded map[decisionKey]bool
	floor   decisionKey // orders no greater are ignored
}

func newTally(need int) *tally {
	return &tally{
		need:    need,
		orders:  map[decisionKey]map[string][]uint64{},
		votes:   map[uint64][]decisionKey{},
		yielded: map[decisionKey]bool{},
	}
}

// add counts d and returns the order if d is the decision that makes
// f+1 for its value.
func (t *tally) add(d protocol.Decision) (DecidedOrder, bool) {
	k := decisionKey{d.Term, d.Seq}
	if t.yielded[k] || !t.floor.less(k) {
		return DecidedOrder{}, false
	}
	if slices.Contains(t.votes[d.Member], k) {
		return DecidedOrder{}, false // a copy, or a second value: the first counts
	}
	if len(t.votes[d.Member]) >= maxVotesPerMember {
		t.forget(d.Member, t.votes[d.Member][0])
	}
	t.votes[d.Member] = append(t.votes[d.Member], k)
	values := t.orders[k]
	if values == nil {
		values = map[string][]uint64{}
		t.orders[k] = values
	}
	values[d.Value] = append(values[d.Value], d.Member)
	members := values[d.Value]
	if len(members) < t.need {
		return DecidedOrder{}, false
	}
	order := DecidedOrder{Cluster: d.Cluster, Term: d.Term, Seq: d.Seq, Value: d.Value, Members: slices.Sorted(slices.Values(members))}
	for _, vs := range values {
		for _, m := range vs {
			t.votes[m] = slices.DeleteFunc(t.votes[m], func(x decisionKey) bool { return x == k })
			if len(t.votes[m]) == 0 {
				delete(t.votes, m)
			}
		}
	}
	delete(t.orders, k)
	t.yielded[k] = true
	if len(t.yielded) > maxYielded {
		lowest := k
		for y := range t.yielded {
			if y.less(lowest) {
				lowest = y
			}
		}
		delete(t.yielded, lowest)
		t.floor = lowest
	}
	return order, true
}

// forget removes member's decision on k.
func (t *tally) forget(member uint64, k decisionKey) {
	t.votes[member] = slices.DeleteFunc(t.votes[member], func(x decisionKey) bool { return x == k })
	values := t.orders[k]
	for v, ms := range values {
		values[v] = slices.DeleteFunc(ms, func(m uint64) bool { return m == member })
		if len(values[v]) == 0 {
			delete(values, v)
		}
	}
	if len(values) == 0 {
		delete(t.orders, k)
	}
}
