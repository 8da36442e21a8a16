package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// SecretPrefix starts every secret as Standard Webhooks writes them.
const SecretPrefix = "whsec_"

// Bounds of a secret's key, in bytes, as the specification sets them.
const (
	minKey = 24
	maxKey = 64
)

// Secret is the key messages are signed with. Its String never shows the
// key and the key is unexported, so a Secret that reaches a log line (text
// or JSON) or an error stays secret.
type Secret struct{ key []byte }

// ParseSecret reads a secret written as whsec_ and the key in standard
// base64 (surrounding spaces, such as a file's final newline, are
// ignored). The error never holds the secret.
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: it does not start with %q", ErrSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: the part after %q is not standard base64", ErrSecret, SecretPrefix)
	}
	if len(key) < minKey || len(key) > maxKey {
		return Secret{}, fmt.Errorf("%w: its key is %d bytes, want %d to %d", ErrSecret, len(key), minKey, maxKey)
	}
	return Secret{key: key}, nil
}

// IsZero reports whether s holds no key.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// String hides the key.
func (s Secret) String() string { return "whsec_…" }

// Sign is the webhook-signature header of a message: "v1," and the
// base64 HMAC-SHA256, under s's key, of id, the unix timestamp and the
// body joined by dots.
func (s Secret) Sign(id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, s.key)
	fmt.Fprintf(mac, "%s.%d.", id, ts.Unix())
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
