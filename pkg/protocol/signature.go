package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// SignatureHeader is the NATS header that carries a message's signature when
// the cluster has a shared secret.
const SignatureHeader = "Election-Signature"

// Sign returns the hex HMAC-SHA256 of subject and payload under key. Binding
// the subject stops a signed message from being replayed onto another
// subject or cluster.
func Sign(key []byte, subject string, payload []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(subject))
	mac.Write([]byte{0})
	mac.Write(payload)
	return hex.EncodeToString(mac.Sum(nil))
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
	want, _ := hex.DecodeString(Sign(key, subject, payload))
	if !hmac.Equal(got, want) {
		return reject(ReasonSignature, "signature does not match")
	}
	return nil
}
