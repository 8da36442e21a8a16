package webhook

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// testSecret is the example secret of the Standard Webhooks specification.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestParseSecret(t *testing.T) {
	key := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"spec example", testSecret, true},
		{"trailing newline of a file", testSecret + "\n", true},
		{"24 bytes", "whsec_" + key(24), true},
		{"64 bytes", "whsec_" + key(64), true},
		{"23 bytes", "whsec_" + key(23), false},
		{"65 bytes", "whsec_" + key(65), false},
		{"no prefix", strings.TrimPrefix(testSecret, "whsec_"), false},
		{"empty", "", false},
		{"prefix only", "whsec_", false},
		{"url-safe base64", "whsec_" + base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xff", 30))), false},
		{"not base64", "whsec_!!!!not-base64!!!!!!!!!!!!!!!!", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSecret(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("ParseSecret(%q) = %v, want ok %v", tc.in, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrSecret) {
				t.Errorf("error %v is not ErrSecret", err)
			}
			if err == nil && s.IsZero() {
				t.Error("parsed secret holds no key")
			}
		})
	}
}

// A secret's error and its String never show the key.
func FuzzParseSecret(f *testing.F) {
	f.Add(testSecret)
	f.Add("whsec_")
	f.Add("whsec_AAAA")
	f.Add("nope")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSecret(in)
		if err != nil {
			if !errors.Is(err, ErrSecret) {
				t.Fatalf("error %v is not ErrSecret", err)
			}
			if b64, ok := strings.CutPrefix(strings.TrimSpace(in), SecretPrefix); ok && len(b64) > 3 && strings.Contains(err.Error(), b64) {
				t.Fatalf("error %q shows the secret", err)
			}
			return
		}
		if n := len(s.key); n < minKey || n > maxKey {
			t.Fatalf("accepted a key of %d bytes", n)
		}
		if strings.Contains(s.String(), strings.TrimPrefix(strings.TrimSpace(in), SecretPrefix)) {
			t.Fatal("String shows the key")
		}
	})
}

// Sign agrees with the specification's own library, which verifies it.
func TestSignVerifiesWithTheStandardLibrary(t *testing.T) {
	s, err := ParseSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"type":"run.finished","timestamp":"2026-12-05T22:00:00Z","data":{"run_id":"r1"}}`)
	h := http.Header{}
	h.Set(HeaderID, "msg_r1_0_abc")
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, s.Sign("msg_r1_0_abc", now, body))
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("the standard library refuses our signature: %v", err)
	}
	h.Set(HeaderID, "msg_other")
	if wh.Verify(body, h) == nil {
		t.Fatal("a signature verified under another id")
	}
}
