package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/formica-run/formica/internal/spec"
)

// parseAgent decodes the "agent" field of a submission with spec.Parse, so
// the API checks a spec exactly as a spec file is checked: unknown keys,
// types, names, policies, handoffs, schemas. Errors read like
// `agent: name: required` or `agent:1: unknown key "harnes"`.
//
// A JSON string is a spec file's text, YAML or JSON, as a person pastes it
// (the dashboard's submit form sends that).
func parseAgent(raw json.RawMessage) (*spec.File, error) {
	var text string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, err
		}
		return spec.Parse([]byte(text), "agent")
	}
	norm, err := yamlSafeJSON(raw)
	if err != nil {
		return nil, err
	}
	return spec.Parse(norm, "agent")
}

// yamlSafeJSON rewrites JSON so a YAML parser reads it as JSON means it:
// YAML knows neither the `\/` escape nor surrogate pairs (`\ud83d\ude00`,
// as Python's json module writes every non-BMP character), and it refuses
// tabs where JSON allows them. Strings are written again by encoding/json
// (raw UTF-8, YAML-compatible escapes), numbers as they came, and everything
// on one line. Key order and duplicate keys are kept, so spec.Parse still
// reports unknown and duplicate keys.
func yamlSafeJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	type frame struct {
		object bool
		n      int // tokens written in this container
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			out.WriteByte(byte(d))
			continue
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			switch {
			case f.object && f.n%2 == 1:
				out.WriteByte(':')
			case f.n > 0:
				out.WriteByte(',')
			}
			f.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			stack = append(stack, frame{object: v == '{'})
		case string:
			b, _ := json.Marshal(v) // a string always encodes
			out.Write(b)
		case json.Number:
			out.WriteString(v.String())
		case bool:
			out.WriteString(strconv.FormatBool(v))
		case nil:
			out.WriteString("null")
		}
	}
}
