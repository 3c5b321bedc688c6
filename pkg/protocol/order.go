package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/baton-election/baton/pkg/certify"
)

// The subjects of the generals' agreement on a byzantine leader's orders
// (package orders):
//
//	election.<cluster>.order     the oral messages of OM(f), broadcast (JSON OrderMessage)
//	election.<cluster>.decided   each member's signed decision (JSON Decision)
const (
	// KindOrder is the subject of the orders' oral messages.
	KindOrder = "order"
	// KindDecided is the subject of the members' decisions.
	KindDecided = "decided"
)

// OrderSubject is where the members of cluster broadcast the oral
// messages of the agreement on the leader's orders.
func OrderSubject(cluster string) string { return Root + "." + cluster + "." + KindOrder }

// DecidedSubject is where each member of cluster publishes, signed, the
// value it decided for an order.
func DecidedSubject(cluster string) string { return Root + "." + cluster + "." + KindDecided }

// MaxOrderValue bounds an order's value in bytes (generals.MaxValueSize).
const MaxOrderValue = 1024

// MaxOrderRelays bounds the relays of one OrderMessage, and its distinct
// values; a member with more to send splits them over several messages.
const MaxOrderRelays = 32

// MaxOrderPath bounds a relay's path: OM(f) with at most 12 members
// (generals.MaxMembers) has paths of at most f+1 = 4 members.
const MaxOrderPath = 4

// MaxOrderMessage bounds an encoded OrderMessage in bytes: MaxOrderRelays
// values of MaxOrderValue bytes, each of which JSON may escape to six
// bytes a byte, as many relays (maxRelayJSON each: the recipient, a path
// of MaxOrderPath IDs of up to 20 digits, two indexes) and signatures
// (maxSignatureJSON each, in base64), the leader's certificate and the
// other fields. The largest message an honest member sends fits
// (TestLargestOrderMessageFits).
const MaxOrderMessage = MaxOrderRelays*(6*MaxOrderValue+8+maxRelayJSON+maxSignatureJSON) + certify.MaxJSONSize + 1024

// maxRelayJSON bounds one relay's JSON, {"to":…,"path":[…],"value":…,"signature":…}
// with its comma; maxSignatureJSON one signature's, 64 bytes in base64
// (88 characters), its quotes and comma.
const (
	maxRelayJSON     = 160
	maxSignatureJSON = 92
)

// MaxDecision bounds an encoded Decision in bytes.
const MaxDecision = 6*MaxOrderValue + 1024

// ErrOrder is wrapped by every error of DecodeOrderMessage and
// DecodeDecision.
var ErrOrder = errors.New("protocol: invalid order message")

// OrderRelay is one oral message: the value that Path's last member says
// reached it along Path, sent to To.
type OrderRelay struct {
	// To is the recipient's member ID.
	To uint64 `json:"to"`
	// Path is the relay chain of member IDs: the leader first, the sender
	// last, all distinct, 1 … MaxOrderPath members.
	Path []uint64 `json:"path"`
	// Value indexes the message's Values.
	Value int `json:"value"`
	// Signature indexes the message's Signatures: the sender's signature
	// of the relay as a statement, certify.Relay(cluster, term, seq,
	// Path, value).
	Signature int `json:"signature"`
}

// OrderMessage carries the oral messages one member sends at once for
// order Seq of Term's leader in Cluster. It is published on OrderSubject,
// signed by From (signing.Signer.Header).
type OrderMessage struct {
	Cluster string `json:"cluster"`
	Term    uint64 `json:"term"`
	Seq     uint64 `json:"seq"`
	// From is the sender: the last member of every relay's path, and the
	// signer.
	From uint64 `json:"from"`
	// Certificate is the certificate of Term's leader: the leader's own
	// messages carry it, and a member opens an order only on a message of
	// the leader it certifies.
	Certificate *certify.Certificate `json:"certificate,omitempty"`
	// Values are the distinct values of the relays, each a valid UTF-8
	// string of at most MaxOrderValue bytes.
	Values []string `json:"values"`
	// Relays are the messages, 1 … MaxOrderRelays.
	Relays []OrderRelay `json:"relays"`
	// Signatures are the distinct signatures of the relays,
	// certify.SignatureSize bytes each (base64 in JSON), 1 … number of
	// relays: one covers every relay of the same path and value, whoever
	// it is addressed to. The receiver checks them against From's key:
	// two relays of one member along one path with different values, both
	// signed, are evidence that it lied (certify.Contradicts).
	Signatures [][]byte `json:"signatures"`
}

// Decision is one member's decision on an order, published on
// DecidedSubject signed by Member.
type Decision struct {
	Cluster string `json:"cluster"`
	Term    uint64 `json:"term"`
	Seq     uint64 `json:"seq"`
	// Value is the decided value (the agreement's default when no value
	// had a majority).
	Value string `json:"value"`
	// Member is the member that decided, and signed.
	Member uint64 `json:"member"`
	// At is when Member decided, by its clock: readers (leader.Orders)
	// count only decisions dated within a bound of their own clock, so
	// that a replay of old decisions is not taken for a new one.
	At Timestamp `json:"at,omitzero"`
}

// EncodeOrderMessage returns the wire form of m, without HTML escaping.
func EncodeOrderMessage(m OrderMessage) ([]byte, error) { return encodeJSON(m) }

// EncodeDecision returns the wire form of d, without HTML escaping.
func EncodeDecision(d Decision) ([]byte, error) { return encodeJSON(d) }

func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// CheckOrderValue reports whether v can be an order's value: valid UTF-8
// (JSON carries nothing else unchanged) of at most MaxOrderValue bytes.
func CheckOrderValue(v string) error {
	if len(v) > MaxOrderValue {
		return fmt.Errorf("%w: value of %d bytes, at most %d", ErrOrder, len(v), MaxOrderValue)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: value is not valid UTF-8", ErrOrder)
	}
	return nil
}

// checkOrderID checks the cluster, term and sequence number an order
// message or decision names.
func checkOrderID(cluster string, term, seq uint64) error {
	switch {
	case ValidateCluster(cluster) != nil:
		return fmt.Errorf("%w: cluster %q", ErrOrder, cluster)
	case term == 0 || term > MaxTerm:
		return fmt.Errorf("%w: term %d, want 1 to %d", ErrOrder, term, MaxTerm)
	case seq == 0:
		return fmt.Errorf("%w: seq missing", ErrOrder)
	}
	return nil
}

// DecodeOrderMessage parses an order message and checks its shape
// (ValidateOrderMessage). It checks no signature: the receiver verifies
// the message's (with signing.MemberKeys.Verify and signing.CheckSigner), the relays'
// and the certificate's.
func DecodeOrderMessage(data []byte) (OrderMessage, error) {
	var m OrderMessage
	if len(data) > MaxOrderMessage {
		return m, fmt.Errorf("%w: %d bytes exceeds %d", ErrOrder, len(data), MaxOrderMessage)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return OrderMessage{}, fmt.Errorf("%w: %w", ErrOrder, err)
	}
	if err := ValidateOrderMessage(m); err != nil {
		return OrderMessage{}, err
	}
	return m, nil
}

// ValidateOrderMessage checks the shape of an order message: its fields,
// paths (distinct non-zero IDs ending at From), value and signature
// indexes, values, signatures' sizes, and that a certificate names its
// cluster and term. It checks no signature. The error wraps ErrOrder.
func ValidateOrderMessage(m OrderMessage) error {
	if err := checkOrderID(m.Cluster, m.Term, m.Seq); err != nil {
		return err
	}
	if m.From == 0 {
		return fmt.Errorf("%w: from missing", ErrOrder)
	}
	if n := len(m.Relays); n == 0 || n > MaxOrderRelays {
		return fmt.Errorf("%w: %d relays, want 1 to %d", ErrOrder, n, MaxOrderRelays)
	}
	if n := len(m.Values); n == 0 || n > len(m.Relays) {
		return fmt.Errorf("%w: %d values for %d relays", ErrOrder, n, len(m.Relays))
	}
	if n := len(m.Signatures); n == 0 || n > len(m.Relays) {
		return fmt.Errorf("%w: %d signatures for %d relays", ErrOrder, n, len(m.Relays))
	}
	for _, v := range m.Values {
		if err := CheckOrderValue(v); err != nil {
			return err
		}
	}
	for i, sig := range m.Signatures {
		if len(sig) != certify.SignatureSize {
			return fmt.Errorf("%w: signature %d of %d bytes, want %d", ErrOrder, i, len(sig), certify.SignatureSize)
		}
	}
	for i, r := range m.Relays {
		if err := checkRelay(r, m.From, len(m.Values), len(m.Signatures)); err != nil {
			return fmt.Errorf("%w: relay %d: %w", ErrOrder, i, err)
		}
	}
	if c := m.Certificate; c != nil && (c.Cluster != m.Cluster || c.Term != m.Term) {
		return fmt.Errorf("%w: %w: the certificate is of term %d of %q, the order of term %d of %q",
			ErrOrder, ErrUncertified, c.Term, c.Cluster, m.Term, m.Cluster)
	}
	return nil
}

// checkRelay checks one relay of a message from from with values values
// and signatures signatures.
func checkRelay(r OrderRelay, from uint64, values, signatures int) error {
	if r.To == 0 {
		return errors.New("to missing")
	}
	if r.Value < 0 || r.Value >= values {
		return fmt.Errorf("value index %d, want 0 to %d", r.Value, values-1)
	}
	if r.Signature < 0 || r.Signature >= signatures {
		return fmt.Errorf("signature index %d, want 0 to %d", r.Signature, signatures-1)
	}
	if n := len(r.Path); n == 0 || n > MaxOrderPath {
		return fmt.Errorf("path of %d members, want 1 to %d", n, MaxOrderPath)
	}
	for i, id := range r.Path {
		if id == 0 {
			return errors.New("member 0 in the path")
		}
		if id == r.To {
			return fmt.Errorf("relay to %d, a member of its path", id)
		}
		for _, other := range r.Path[:i] {
			if other == id {
				return fmt.Errorf("member %d twice in the path", id)
			}
		}
	}
	if last := r.Path[len(r.Path)-1]; last != from {
		return fmt.Errorf("path ends at %d, the message is from %d", last, from)
	}
	return nil
}

// DecodeDecision parses and checks a decision's shape; the receiver
// verifies its signature and that Member signed it.
func DecodeDecision(data []byte) (Decision, error) {
	var d Decision
	if len(data) > MaxDecision {
		return d, fmt.Errorf("%w: decision of %d bytes exceeds %d", ErrOrder, len(data), MaxDecision)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrOrder, err)
	}
	if err := checkOrderID(d.Cluster, d.Term, d.Seq); err != nil {
		return Decision{}, err
	}
	if d.Member == 0 {
		return Decision{}, fmt.Errorf("%w: member missing", ErrOrder)
	}
	if err := CheckOrderValue(d.Value); err != nil {
		return Decision{}, err
	}
	return d, nil
}
