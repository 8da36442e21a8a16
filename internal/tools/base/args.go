package base

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/formica-run/formica/internal/tools"
)

// param describes one argument of a tool. The same list drives the JSON
// Schema shown to the model and the checks of decode, so they cannot drift.
type param struct {
	name     string
	typ      string // JSON Schema type: "string", "integer" or "boolean"
	desc     string
	required bool
	nonEmpty bool // strings: "" is refused (schema minLength 1)
	positive bool // integers: must be >= 1 (schema minimum 1)
}

// schemaOf renders ps as a JSON Schema object with additionalProperties false.
func schemaOf(ps []param) json.RawMessage {
	type prop struct {
		Type        string `json:"type"`
		Description string `json:"description,omitempty"`
		MinLength   int    `json:"minLength,omitempty"`
		Minimum     int    `json:"minimum,omitempty"`
	}
	props := map[string]prop{}
	required := []string{}
	for _, p := range ps {
		pr := prop{Type: p.typ, Description: p.desc}
		if p.nonEmpty {
			pr.MinLength = 1
		}
		if p.positive {
			pr.Minimum = 1
		}
		props[p.name] = pr
		if p.required {
			required = append(required, p.name)
		}
	}
	b, err := json.Marshal(struct {
		Type                 string          `json:"type"`
		Properties           map[string]prop `json:"properties"`
		Required             []string        `json:"required"`
		AdditionalProperties bool            `json:"additionalProperties"`
	}{"object", props, required, false})
	if err != nil {
		panic("base: schema: " + err.Error()) // static data: cannot happen
	}
	return b
}

// badArgs wraps tools.ErrBadArgs with a message.
func badArgs(format string, a ...any) error {
	return fmt.Errorf("%w: %s", tools.ErrBadArgs, fmt.Sprintf(format, a...))
}

// decode checks raw against ps and unmarshals it into dst, a pointer to a
// struct whose json tags are the param names. Every failure wraps
// tools.ErrBadArgs and names the field at fault. Empty input counts as {}.
func decode(raw json.RawMessage, ps []param, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return badArgs("unparsable JSON: %v", err)
		}
		return badArgs("arguments must be a JSON object")
	}
	if obj == nil { // the literal null
		return badArgs("arguments must be a JSON object")
	}
	known := make([]string, len(ps))
	for i, p := range ps {
		known[i] = p.name
	}
	for k := range obj {
		if !slices.Contains(known, k) {
			return badArgs("unknown field %q (fields: %s)", k, strings.Join(known, ", "))
		}
	}
	for _, p := range ps {
		v, ok := obj[p.name]
		if !ok || string(v) == "null" {
			if p.required {
				return badArgs("missing required field %q", p.name)
			}
			continue
		}
		if err := checkValue(p, v); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return badArgs("%v", err) // not expected after checkValue
	}
	return nil
}

// checkValue checks one present, non-null value against its param.
func checkValue(p param, v json.RawMessage) error {
	switch p.typ {
	case "string":
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return badArgs("field %q must be a string, got %s", p.name, jsonKind(v))
		}
		if p.nonEmpty && s == "" {
			return badArgs("field %q must not be empty", p.name)
		}
	case "boolean":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return badArgs("field %q must be true or false, got %s", p.name, jsonKind(v))
		}
	case "integer":
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return badArgs("field %q must be an integer, got %s", p.name, jsonKind(v))
		}
		if p.positive && n < 1 {
			return badArgs("field %q must be at least 1, got %d", p.name, n)
		}
	}
	return nil
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v json.RawMessage) string {
	switch c := bytes.TrimSpace(v); {
	case len(c) == 0:
		return "nothing"
	case c[0] == '"':
		return "a string"
	case c[0] == '{':
		return "an object"
	case c[0] == '[':
		return "an array"
	case c[0] == 't' || c[0] == 'f':
		return "a boolean"
	case bytes.ContainsAny(c, ".eE"):
		return "a number " + string(c)
	default:
		return "a number out of range " + string(c)
	}
}

// stringField returns the string field name of raw, or "" when raw is not an
// object or the field is absent or not a string. Subject uses it: it must not
// fail, and Run reports the bad arguments.
func stringField(raw json.RawMessage, name string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(obj[name], &s) != nil {
		return ""
	}
	return s
}
