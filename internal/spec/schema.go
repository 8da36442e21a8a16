package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// CompileSchema compiles an output schema (JSON Schema, draft 2020-12 unless
// it says otherwise in $schema). Validation and the runner both use it, so a
// schema that passed Validate compiles at run time too.
//
// References outside the schema itself ($ref to files or URLs) are refused:
// a spec must not make the process read local files or the network.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	const loc = "mem://spec/output_schema.json"
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, errors.New(SchemaErrorText(err))
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, errors.New(SchemaErrorText(err))
	}
	return sch, nil
}

// SchemaErrorText renders a jsonschema compile or validation error on one
// line, each failing leaf as "at '/json/pointer': message", joined by "; ".
// The library's own text is an indented tree, too long for a tool result or
// an error line.
func SchemaErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		return "not a valid JSON Schema: " + SchemaErrorText(sve.Err)
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	var leaves []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e.Error())
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("external references are not allowed")
}

// nodeJSON converts a YAML value to JSON text, keeping mapping order. A
// string holding JSON text is accepted as that JSON, so a schema may also be
// written as a quoted JSON string.
func nodeJSON(n *yaml.Node) (json.RawMessage, error) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		s := strings.TrimSpace(n.Value)
		if !json.Valid([]byte(s)) {
			return nil, errors.New("want a mapping or JSON text")
		}
		return json.RawMessage(s), nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	var b bytes.Buffer
	if err := writeJSON(&b, n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		keys, vals, err := pairs(n)
		if err != nil {
			return err
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			if err := writeJSON(b, vals[i]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return fmt.Errorf("line %d: %s is not a JSON number", n.Line, n.Value)
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.Write(vb)
	default:
		return fmt.Errorf("line %d: unsupported YAML node", n.Line)
	}
	return nil
}

// pairs lists a mapping's keys and values in order, merge keys expanded (own
// keys win) and duplicate own keys refused.
func pairs(n *yaml.Node) ([]string, []*yaml.Node, error) {
	var keys []string
	var vals []*yaml.Node
	at := map[string]int{}
	own := map[string]bool{}
	set := func(k string, v *yaml.Node, mine bool) {
		if i, ok := at[k]; ok {
			if mine || !own[k] {
				vals[i] = v
			}
		} else {
			at[k] = len(keys)
			keys = append(keys, k)
			vals = append(vals, v)
		}
		own[k] = own[k] || mine
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if isMerge(k) {
			for _, m := range mergeSources(v) {
				if m.Kind != yaml.MappingNode {
					return nil, nil, fmt.Errorf("line %d: merge of a non-mapping", k.Line)
				}
				mk, mv, err := pairs(m)
				if err != nil {
					return nil, nil, err
				}
				for j := range mk {
					set(mk[j], mv[j], false)
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return nil, nil, fmt.Errorf("line %d: mapping keys must be scalars", k.Line)
		}
		if own[k.Value] {
			return nil, nil, fmt.Errorf("line %d: key %q defined twice", k.Line, k.Value)
		}
		set(k.Value, v, true)
	}
	return keys, vals, nil
}
