package runner

import (
	"strings"

	"github.com/formica-run/formica/internal/spec"
)

// SchemaMarker introduces the output schema in a system prompt. The sim model
// looks for it to answer with JSON.
const SchemaMarker = "Respond with only JSON matching this JSON Schema:"

const defaultInstructions = "You are a capable agent. Complete the task and reply with the result."

func systemPrompt(a *spec.Agent, schema *compiledSchema) string {
	var b strings.Builder
	if s := strings.TrimSpace(a.Instructions); s != "" {
		b.WriteString(s)
	} else {
		b.WriteString(defaultInstructions)
	}
	if schema != nil {
		b.WriteString("\n\n")
		b.WriteString(SchemaMarker)
		b.WriteString("\n")
		b.WriteString(schema.text)
	}
	return b.String()
}

func correction(err error) string {
	return "Your final answer did not validate against the required JSON Schema: " + err.Error() +
		"\nReply again with only the corrected JSON value, nothing else."
}
