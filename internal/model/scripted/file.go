package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/formica-run/formica/internal/model"
)

// file is the script format; see the package documentation.
type file struct {
	Responses []response `yaml:"responses"`
}

type response struct {
	When      string     `yaml:"when"`
	Text      string     `yaml:"text"`
	ToolCalls []toolCall `yaml:"tool_calls"`
	Usage     usage      `yaml:"usage"`
	Error     string     `yaml:"error"`
}

// usage mirrors model.Usage, which has no YAML tags.
type usage struct {
	InputTokens      int64 `yaml:"input_tokens"`
	OutputTokens     int64 `yaml:"output_tokens"`
	CacheReadTokens  int64 `yaml:"cache_read_tokens"`
	CacheWriteTokens int64 `yaml:"cache_write_tokens"`
}

func (u usage) model() model.Usage {
	return model.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens}
}

type toolCall struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	// Arguments is a mapping (re-encoded as JSON) or a string (kept raw).
	Arguments yaml.Node `yaml:"arguments"`
	// json is Arguments as the JSON text the model returns, set by decode.
	json string
}

// decode parses and checks a script, turning each tool call's arguments into
// the JSON text the model will return.
func decode(data []byte, name string) ([]response, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: empty file", ErrBadScript, name)
		}
		return nil, yamlError(err, name)
	}
	if len(f.Responses) == 0 {
		return nil, fmt.Errorf("%w: %s: no responses", ErrBadScript, name)
	}
	for i, r := range f.Responses {
		at := fmt.Sprintf("responses[%d]", i)
		if r.Error != "" && (r.Text != "" || len(r.ToolCalls) > 0) {
			return nil, fmt.Errorf("%w: %s: %s: error excludes text and tool_calls", ErrBadScript, name, at)
		}
		for j := range r.ToolCalls {
			c := &r.ToolCalls[j]
			if c.Name == "" {
				return nil, fmt.Errorf("%w: %s: %s.tool_calls[%d].name: required", ErrBadScript, name, at, j)
			}
			var err error
			if c.json, err = argumentsJSON(&c.Arguments); err != nil {
				return nil, fmt.Errorf("%w: %s: %s.tool_calls[%d].arguments: %v", ErrBadScript, name, at, j, err)
			}
		}
	}
	return f.Responses, nil
}

// argumentsJSON is a string argument as written, anything else as JSON;
// absent or null arguments are "{}".
func argumentsJSON(n *yaml.Node) (string, error) {
	if n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return "{}", nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		return n.Value, nil
	}
	var b bytes.Buffer
	if err := writeJSON(&b, n); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writeJSON encodes a YAML value as JSON, keeping mapping order.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		open, close, step := byte('['), byte(']'), 1
		if n.Kind == yaml.MappingNode {
			open, close, step = '{', '}', 2
		}
		b.WriteByte(open)
		for i := 0; i < len(n.Content); i += step {
			if i > 0 {
				b.WriteByte(',')
			}
			if step == 2 {
				if k := n.Content[i]; k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
					return fmt.Errorf("line %d: keys must be plain scalars", k.Line)
				}
				kb, _ := json.Marshal(n.Content[i].Value)
				b.Write(kb)
				b.WriteByte(':')
			}
			if err := writeJSON(b, n.Content[i+step-1]); err != nil {
				return err
			}
		}
		b.WriteByte(close)
		return nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.Write(vb)
		return nil
	}
	return fmt.Errorf("line %d: unsupported YAML value", n.Line)
}

var (
	yamlLine    = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknown = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// yamlError reports yaml.v3 errors as "name:line: message".
func yamlError(err error, name string) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	for i, m := range msgs {
		loc := name
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			loc, m = name+":"+sub[1], sub[2]
		}
		if sub := yamlUnknown.FindStringSubmatch(m); sub != nil {
			m = "unknown key " + strconv.Quote(sub[1])
		}
		msgs[i] = loc + ": " + m
	}
	return fmt.Errorf("%w: %s", ErrBadScript, strings.Join(msgs, "; "))
}
