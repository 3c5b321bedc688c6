package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// SignatureHeader is the NATS header that carries a message's signature when
// the cluster has a shared secret.
const SignatureHeader = "Election-Signature"

// Sign returns the hex HMAC-SHA256 of subject and payload under key. Binding
// the subject stops a signed message from being replayed onto another
// subject or cluster.
func Sign(key []byte, subject string, payload []byte) string {
	return hex.EncodeToString(mac(key, subject, payload))
}

// mac is the HMAC-SHA256 of subject, a zero byte and payload under key.
func mac(key []byte, subject string, payload []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum(make([]byte, 0, sha256.Size))
}

// Verify checks a signature made by Sign. It returns a *ValidationError
// with ReasonSignature when the signature is missing or wrong.
func Verify(key []byte, subject string, payload []byte, signature string) error {
	if signature == "" {
		return reject(ReasonSignature, "message is not signed")
	}
	got, err := hex.DecodeString(signature)
	if err != nil {
		return reject(ReasonSignature, "signature is not hex")
	}
	if !hmac.Equal(got, mac(key, subject, payload)) {
		return reject(ReasonSignature, "signature does not match")
	}
	return nil
}

// SignAnnouncement returns the signature of an announcement of cluster. It
// is bound to the cluster's leader subject wherever the announcement
// travels (published, stored in a stream or sent as the answer to a query),
// so a reader checks it the same way on every path.
func SignAnnouncement(key []byte, cluster string, data []byte) string {
	return Sign(key, LeaderSubject(cluster), data)
}

// ReadAnnouncement decodes an announcement received for cluster. With a
// key, it must carry signature, made by SignAnnouncement with that key: a
// missing or wrong one is a *ValidationError with ReasonSignature. A
// malformed announcement, or one of another cluster, wraps ErrAnnouncement.
// Every reader (the observer, pkg/leader) checks announcements with it.
func ReadAnnouncement(key []byte, cluster string, data []byte, signature string) (Announcement, error) {
	a, err := DecodeAnnouncement(data)
	if err != nil {
		return Announcement{}, err
	}
	if len(key) > 0 {
		if err := Verify(key, LeaderSubject(a.Cluster), data, signature); err != nil {
			return Announcement{}, err
		}
	}
	if a.Cluster != cluster {
		return Announcement{}, fmt.Errorf("%w: cluster %q where %q was expected", ErrAnnouncement, a.Cluster, cluster)
	}
	return a, nil
}
