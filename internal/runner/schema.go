package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/formica-run/formica/internal/spec"
)

// compiledSchema is an output schema ready to validate final answers.
type compiledSchema struct {
	text   string
	schema *jsonschema.Schema
}

// compileSchema compiles raw once per distinct text; every helper of a fan-out
// shares the result.
func (r *Runner) compileSchema(raw json.RawMessage) (*compiledSchema, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("output schema is not JSON: %w", err)
	}
	text := buf.String()
	if c, ok := r.schemas.Load(text); ok {
		return c.(*compiledSchema), nil
	}
	s, err := spec.CompileSchema(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	cs := &compiledSchema{text: text, schema: s}
	actual, _ := r.schemas.LoadOrStore(text, cs)
	return actual.(*compiledSchema), nil
}

// check extracts the JSON value of a final answer (a fenced block is allowed)
// and validates it, returning the JSON text that becomes the output.
func (c *compiledSchema) check(answer string) (string, error) {
	text := stripFence(strings.TrimSpace(answer))
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return "", fmt.Errorf("the answer is not a JSON value: %v", err)
	}
	if err := c.schema.Validate(v); err != nil {
		return "", errors.New(spec.SchemaErrorText(err))
	}
	return text, nil
}

// stripFence removes a surrounding ``` or ```json fence.
func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	body := strings.TrimSuffix(s[3:], "```")
	if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.ContainsAny(body[:nl], "{[\"") {
		body = body[nl+1:]
	}
	return strings.TrimSpace(body)
}
