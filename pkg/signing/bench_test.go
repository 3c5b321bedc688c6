package signing

import (
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// The cost of one heartbeat on its way: encoded and signed by the leader,
// checked and decoded by each follower. go test -bench . ./pkg/signing
func heartbeat() protocol.Message {
	m := protocol.Message{Type: protocol.TypeHeartbeat, From: 5, Term: 12}
	protocol.NewStamp(1795477232225336973).Apply(&m, time.Unix(1_800_000_000, 0))
	return m
}

func BenchmarkEncodeSign(b *testing.B) {
	s := testSigner(b, 5)
	m := heartbeat()
	subject := protocol.BroadcastSubject("bench", protocol.TypeHeartbeat)
	b.ReportAllocs()
	for b.Loop() {
		data, err := protocol.Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Header(subject, data)
	}
}

func BenchmarkVerifyDecode(b *testing.B) {
	s := testSigner(b, 5)
	keys := testKeys(b, s)
	subject := protocol.BroadcastSubject("bench", protocol.TypeHeartbeat)
	data, err := protocol.Encode(heartbeat())
	if err != nil {
		b.Fatal(err)
	}
	h := s.Header(subject, data)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := keys.Verify(subject, data, h); err != nil {
			b.Fatal(err)
		}
		if _, err := protocol.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
