package sim

import (
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/formica-run/formica/internal/model"
)

// findSchema returns the JSON Schema following the last SchemaMarker in the
// system messages or the task, in message order.
func findSchema(msgs []model.Message, task string) (any, bool) {
	var found any
	ok := false
	look := func(s string) {
		i := strings.LastIndex(s, SchemaMarker)
		if i < 0 {
			return
		}
		var v any
		if json.NewDecoder(strings.NewReader(s[i+len(SchemaMarker):])).Decode(&v) == nil {
			found, ok = v, true
		}
	}
	for _, m := range msgs {
		if m.Role == model.RoleSystem {
			look(m.Content)
		}
	}
	look(task)
	return found, ok
}

// fill renders the smallest JSON value it can build for schema, using text
// for strings. It understands what output schemas commonly hold:
//
//   - const and enum (the first value); local $ref ("#/..."); anyOf/oneOf
//     (the first non-null branch); allOf (branches merged);
//   - type, or one inferred (properties/required: object, items: array,
//     else string); with a list of types, the first that is not "null";
//   - object: every required property, nothing else;
//   - array: minItems items (none by default) built from items/prefixItems;
//   - string: text, padded with '.' to minLength and cut to maxLength;
//   - number/integer: 0 moved into [minimum, maximum] and past exclusive bounds;
//   - boolean: true; null: null.
//
// Formats, patterns and other keywords are ignored.
func fill(schema any, text string) string {
	b, err := json.Marshal(build(schema, schema, text, 0))
	if err != nil {
		return text
	}
	return string(b)
}

func build(root, s any, text string, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > 32 {
		return text // true, {} or too deep: anything goes, say it plainly
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := pointer(root, ref); ok {
			return build(root, target, text, depth+1)
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if branches, ok := m[key].([]any); ok && len(branches) > 0 {
			pick := branches[0]
			for _, b := range branches {
				if bm, ok := b.(map[string]any); !ok || bm["type"] != "null" {
					pick = b
					break
				}
			}
			return build(root, pick, text, depth+1)
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		return build(root, mergeAll(m, all), text, depth+1)
	}
	switch schemaType(m) {
	case "object":
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		out := map[string]any{}
		for _, r := range req {
			if name, ok := r.(string); ok {
				var ps any = true
				if p, ok := props[name]; ok {
					ps = p
				}
				out[name] = build(root, ps, text, depth+1)
			}
		}
		return out
	case "array":
		n, _ := m["minItems"].(float64)
		prefix, _ := m["prefixItems"].([]any)
		out := []any{}
		for i := 0; i < int(n); i++ {
			var is any = m["items"]
			if i < len(prefix) {
				is = prefix[i]
			}
			out = append(out, build(root, is, text, depth+1))
		}
		return out
	case "integer":
		return number(m, true)
	case "number":
		return number(m, false)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return str(m, text)
}

func schemaType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	switch {
	case m["properties"] != nil || m["required"] != nil:
		return "object"
	case m["items"] != nil || m["prefixItems"] != nil:
		return "array"
	}
	return "string"
}

func str(m map[string]any, text string) string {
	if lo, ok := m["minLength"].(float64); ok {
		if n := int(lo) - utf8.RuneCountInString(text); n > 0 {
			text += strings.Repeat(".", n)
		}
	}
	if hi, ok := m["maxLength"].(float64); ok && utf8.RuneCountInString(text) > int(hi) {
		text = string([]rune(text)[:int(hi)])
	}
	return text
}

func number(m map[string]any, integer bool) float64 {
	up, down := func(x float64) float64 { return x }, func(x float64) float64 { return x }
	if integer {
		up, down = math.Ceil, math.Floor
	}
	v := 0.0
	if lo, ok := m["minimum"].(float64); ok && v < up(lo) {
		v = up(lo)
	}
	if lo, ok := m["exclusiveMinimum"].(float64); ok && v <= lo {
		v = down(lo) + 1
	}
	if hi, ok := m["maximum"].(float64); ok && v > down(hi) {
		v = down(hi)
	}
	if hi, ok := m["exclusiveMaximum"].(float64); ok && v >= hi {
		v = up(hi) - 1
	}
	return v + 0 // no negative zero
}

// mergeAll folds allOf branches into one schema: their properties merged,
// their required lists joined, other keywords the first seen.
func mergeAll(m map[string]any, all []any) map[string]any {
	out := map[string]any{}
	props := map[string]any{}
	var req []any
	for _, s := range append([]any{m}, all...) {
		sm, ok := s.(map[string]any)
		if !ok {
			continue
		}
		for k := range sm { // keys of one map are distinct: order does not matter
			switch k {
			case "allOf":
			case "properties":
				p, _ := sm[k].(map[string]any)
				for name, ps := range p {
					if _, ok := props[name]; !ok {
						props[name] = ps
					}
				}
			case "required":
				r, _ := sm[k].([]any)
				req = append(req, r...)
			default:
				if _, ok := out[k]; !ok {
					out[k] = sm[k]
				}
			}
		}
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(req) > 0 {
		out["required"] = req
	}
	return out
}

// pointer resolves a local reference "#/a/b" (JSON Pointer) within root.
func pointer(root any, ref string) (any, bool) {
	if ref == "#" {
		return root, true
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		c, _ := cur.(map[string]any) // nil, with no keys, when cur is not an object
		v, ok := c[tok]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}
