package model

import (
	"testing"

	"github.com/formica-run/formica/internal/pack/packtest"
)

type plainMessage Message

// TestPackMatchesTheTags: a message writes itself byte for byte as the
// reflective encoder writes it.
func TestPackMatchesTheTags(t *testing.T) {
	msgs, full := packtest.Leaves[Message](t)
	if len(msgs) < 6 {
		t.Fatalf("found %d leaf fields of a message; the filler misses some", len(msgs))
	}
	redacted := Message{Role: RoleAssistant, Reasoning: []Reasoning{{Redacted: "opaque"}, {Text: "t"}}}
	packtest.MatchesReflective(t, append([]Message{{}, full, redacted}, msgs...), (*Message).Pack,
		func(m *Message) any { return (*plainMessage)(m) })
}
