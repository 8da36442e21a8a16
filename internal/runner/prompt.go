package runner

import (
	"cmp"
	"strings"

	"github.com/formica-run/formica/internal/spec"
)

// SchemaMarker introduces the output schema in a system prompt. The sim model
// looks for it to answer with JSON.
const SchemaMarker = "Respond with only JSON matching this JSON Schema:"

const defaultInstructions = "You are a capable agent. Complete the task and reply with the result."

func systemPrompt(a *spec.Agent, schema *compiledSchema) string {
	s := cmp.Or(strings.TrimSpace(a.Instructions), defaultInstructions)
	if schema != nil {
		s += "\n\n" + SchemaMarker + "\n" + schema.text
	}
	return s
}

func correction(err error) string {
	return "Your final answer did not validate against the required JSON Schema: " + err.Error() +
		"\nReply again with only the corrected JSON value, nothing else."
}
