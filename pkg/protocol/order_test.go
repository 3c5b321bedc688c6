package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/protocol"
)

func TestOrderSubjects(t *testing.T) {
	if got, want := protocol.OrderSubject("c1"), "election.c1.order"; got != want {
		t.Errorf("OrderSubject = %q; want %q", got, want)
	}
	if got, want := protocol.DecidedSubject("c1"), "election.c1.decided"; got != want {
		t.Errorf("DecidedSubject = %q; want %q", got, want)
	}
}

func goodOrder() protocol.OrderMessage {
	return protocol.OrderMessage{Cluster: "c1", Term: 7, Seq: 1, From: 3,
		Values:     []string{"a<b>&", "b"},
		Relays:     []protocol.OrderRelay{{To: 1, Path: []uint64{4, 3}, Value: 0}, {To: 2, Path: []uint64{4, 3}, Value: 1, Signature: 1}},
		Signatures: [][]byte{make([]byte, certify.SignatureSize), make([]byte, certify.SignatureSize)}}
}

func TestOrderMessageRoundTrip(t *testing.T) {
	data, err := protocol.EncodeOrderMessage(goodOrder())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"a<b>&"`) {
		t.Errorf("encoding %s escapes HTML; want the value as is", data)
	}
	m, err := protocol.DecodeOrderMessage(data)
	if err != nil {
		t.Fatalf("DecodeOrderMessage(%s): %v", data, err)
	}
	if m.Values[0] != "a<b>&" || m.Relays[1].To != 2 || m.Relays[1].Signature != 1 || m.From != 3 || len(m.Signatures) != 2 {
		t.Errorf("decoded %+v; want the message encoded", m)
	}
}

// Every field from the network is checked before use.
func TestDecodeOrderMessageRejects(t *testing.T) {
	cases := map[string]func(*protocol.OrderMessage){
		"cluster":            func(m *protocol.OrderMessage) { m.Cluster = "a.b" },
		"term zero":          func(m *protocol.OrderMessage) { m.Term = 0 },
		"term ceiling":       func(m *protocol.OrderMessage) { m.Term = protocol.MaxTerm + 1 },
		"seq zero":           func(m *protocol.OrderMessage) { m.Seq = 0 },
		"from zero":          func(m *protocol.OrderMessage) { m.From = 0 },
		"no relays":          func(m *protocol.OrderMessage) { m.Relays = nil },
		"no values":          func(m *protocol.OrderMessage) { m.Values = nil },
		"too many values":    func(m *protocol.OrderMessage) { m.Values = []string{"a", "b", "c"} },
		"value size":         func(m *protocol.OrderMessage) { m.Values[1] = strings.Repeat("x", protocol.MaxOrderValue+1) },
		"value index":        func(m *protocol.OrderMessage) { m.Relays[0].Value = 2 },
		"negative index":     func(m *protocol.OrderMessage) { m.Relays[0].Value = -1 },
		"to zero":            func(m *protocol.OrderMessage) { m.Relays[0].To = 0 },
		"empty path":         func(m *protocol.OrderMessage) { m.Relays[0].Path = nil },
		"long path":          func(m *protocol.OrderMessage) { m.Relays[0].Path = []uint64{4, 5, 6, 7, 3} },
		"repeated member":    func(m *protocol.OrderMessage) { m.Relays[0].Path = []uint64{3, 3} },
		"member zero":        func(m *protocol.OrderMessage) { m.Relays[0].Path = []uint64{0, 3} },
		"path not at from":   func(m *protocol.OrderMessage) { m.Relays[0].Path = []uint64{4, 2} },
		"to in the path":     func(m *protocol.OrderMessage) { m.Relays[0].To = 4 },
		"no signatures":      func(m *protocol.OrderMessage) { m.Signatures = nil },
		"signature size":     func(m *protocol.OrderMessage) { m.Signatures[1] = m.Signatures[1][1:] },
		"signature index":    func(m *protocol.OrderMessage) { m.Relays[0].Signature = 2 },
		"negative signature": func(m *protocol.OrderMessage) { m.Relays[0].Signature = -1 },
		"too many signatures": func(m *protocol.OrderMessage) {
			m.Signatures = append(m.Signatures, make([]byte, certify.SignatureSize))
		},
		"too many relays": func(m *protocol.OrderMessage) {
			for range protocol.MaxOrderRelays {
				m.Relays = append(m.Relays, m.Relays[0])
			}
		},
		"certificate of another term": func(m *protocol.OrderMessage) {
			m.Certificate = &certify.Certificate{Cluster: "c1", Term: 6, Leader: 3}
		},
	}
	for name, change := range cases {
		m := goodOrder()
		change(&m)
		data, err := protocol.EncodeOrderMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.DecodeOrderMessage(data); !errors.Is(err, protocol.ErrOrder) {
			t.Errorf("%s: DecodeOrderMessage: %v; want ErrOrder", name, err)
		}
	}
	if _, err := protocol.DecodeOrderMessage(make([]byte, protocol.MaxOrderMessage+1)); !errors.Is(err, protocol.ErrOrder) {
		t.Errorf("oversized: %v; want ErrOrder", err)
	}
}

// The largest order message a member may send, with every field at its
// longest, fits in MaxOrderMessage: MaxOrderRelays relays of paths of
// MaxOrderPath 20-digit IDs, as many distinct values of MaxOrderValue
// bytes that JSON escapes to six bytes each, as many signatures, and a
// certificate of the largest size certify reads.
func TestLargestOrderMessageFits(t *testing.T) {
	const id = ^uint64(0)
	m := protocol.OrderMessage{Cluster: strings.Repeat("c", 255), Term: protocol.MaxTerm, Seq: id, From: id}
	for i := range protocol.MaxOrderRelays {
		value := []byte(strings.Repeat("\x01", protocol.MaxOrderValue))
		value[0] = byte('A' + i) // distinct
		m.Values = append(m.Values, string(value))
		m.Signatures = append(m.Signatures, make([]byte, certify.SignatureSize))
		m.Relays = append(m.Relays, protocol.OrderRelay{To: id - 1, Path: []uint64{id - 4, id - 3, id - 2, id}, Value: i, Signature: i})
	}
	if err := protocol.ValidateOrderMessage(m); err != nil {
		t.Fatalf("the largest message is invalid: %v", err)
	}
	data, err := protocol.EncodeOrderMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	if got, room := len(data)+certify.MaxJSONSize, protocol.MaxOrderMessage; got > room {
		t.Errorf("the largest message takes %d bytes with a certificate of %d; MaxOrderMessage is %d", got, certify.MaxJSONSize, room)
	}
	if _, err := protocol.DecodeOrderMessage(data); err != nil {
		t.Errorf("DecodeOrderMessage of the largest message: %v", err)
	}
}

func TestDecodeDecision(t *testing.T) {
	good := protocol.Decision{Cluster: "c1", Term: 7, Seq: 2, Value: "attack", Member: 1}
	data, _ := protocol.EncodeDecision(good)
	if d, err := protocol.DecodeDecision(data); err != nil || d != good {
		t.Errorf("DecodeDecision(%s) = %+v, %v; want %+v", data, d, err, good)
	}
	for name, d := range map[string]protocol.Decision{
		"member zero": {Cluster: "c1", Term: 7, Seq: 2, Member: 0},
		"seq zero":    {Cluster: "c1", Term: 7, Seq: 0, Member: 1},
		"value size":  {Cluster: "c1", Term: 7, Seq: 2, Member: 1, Value: strings.Repeat("x", protocol.MaxOrderValue+1)},
	} {
		data, _ := protocol.EncodeDecision(d)
		if _, err := protocol.DecodeDecision(data); !errors.Is(err, protocol.ErrOrder) {
			t.Errorf("%s: DecodeDecision: %v; want ErrOrder", name, err)
		}
	}
	if err := protocol.CheckOrderValue("\xff"); err == nil {
		t.Error("CheckOrderValue accepted invalid UTF-8")
	}
}
