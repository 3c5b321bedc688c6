package protocol

import (
	"testing"
	"time"
)

// The cost of one heartbeat on its way: encoded and signed by the leader,
// checked and decoded by each follower. go test -bench . ./pkg/protocol
func heartbeat() Message {
	m := Message{Type: TypeHeartbeat, From: 5, Term: 12}
	NewStamp(1795477232225336973).Apply(&m, time.Unix(1_800_000_000, 0))
	return m
}

func BenchmarkEncodeSign(b *testing.B) {
	key := []byte("a shared secret of the cluster")
	m := heartbeat()
	subject := BroadcastSubject("bench", TypeHeartbeat)
	b.ReportAllocs()
	for b.Loop() {
		data, err := Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		_ = Sign(key, subject, data)
	}
}

func BenchmarkVerifyDecode(b *testing.B) {
	key := []byte("a shared secret of the cluster")
	subject := BroadcastSubject("bench", TypeHeartbeat)
	data, err := Encode(heartbeat())
	if err != nil {
		b.Fatal(err)
	}
	sig := Sign(key, subject, data)
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(key, subject, data, sig); err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
