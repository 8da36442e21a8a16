// Package ids holds the one rule for the ids users choose and the system
// makes (runs, approvals): 1 to 64 letters, digits, '-' or '_'. Such an id is
// one NATS subject token, one KV key and one URL path segment, so every layer
// that takes an id (CLI, HTTP API, run store, coordinator) asks Check here
// and they cannot drift apart.
package ids

import (
	"errors"
	"fmt"
	"strings"
)

// Max is the longest id.
const Max = 64

// ErrInvalid reports an id that breaks the rule.
var ErrInvalid = errors.New("invalid id")

// Rule says the rule in words, for messages and docs.
const Rule = "1 to 64 letters, digits, '-' or '_'"

// chars are the characters an id may hold.
const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// Valid reports whether id follows the rule.
func Valid(id string) bool {
	return id != "" && len(id) <= Max && strings.TrimLeft(id, chars) == ""
}

// Check returns nil for a valid id, else an error wrapping ErrInvalid that
// quotes the id (clipped) and states the rule.
func Check(id string) error {
	if Valid(id) {
		return nil
	}
	shown := id
	if len(shown) > Max+8 {
		shown = shown[:Max] + "…"
	}
	return fmt.Errorf("%w %q: want %s", ErrInvalid, shown, Rule)
}

// CheckToken is the looser rule for the names processes go by (worker and
// coordinator ids, credential names): any text that is one NATS subject
// token, so a name can sit in a subject without widening it.
func CheckToken(id string) error {
	if id == "" || strings.ContainsAny(id, ". *>\t\r\n") {
		return fmt.Errorf("%w: %q must be one subject token", ErrInvalid, id)
	}
	return nil
}
