package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads and parses the spec file at path; see Parse.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes a spec file, YAML or JSON (JSON is YAML), and validates it.
// filename only labels errors.
//
// Every problem is reported at once, one per line, as "file:line: message"
// for syntax, type and unknown-key errors (`agent.yaml:7: unknown key "harnes"`)
// and as "file: field.path: message" for validation errors. All match
// ErrInvalid under errors.Is.
//
// Unknown keys are found by walking the YAML tree against the Go types rather
// than through yaml.v3's KnownFields, because the output_schema fields are
// free-form JSON Schema and are decoded separately.
//
// A spec is at most MaxBytes, MaxNodes (aliases expanded) and MaxDepth.
func Parse(data []byte, filename string) (*File, error) {
	if filename == "" {
		filename = "spec"
	}
	if len(data) > MaxBytes {
		return nil, &posError{file: filename, msg: fmt.Sprintf("%d bytes is more than a spec may have (%d)", len(data), MaxBytes)}
	}
	root, err := parseNode(data, filename)
	if err != nil {
		return nil, err
	}
	if errs := checkKeys(root, reflect.TypeFor[File](), filename); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var f File
	if err := root.Decode(&f); err != nil {
		return nil, yamlError(err, filename)
	}
	if err := decodeSchemas(root, &f, filename); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, withFile(err, filename)
	}
	return &f, nil
}

// parseNode reads exactly one YAML document whose top is a mapping.
func parseNode(data []byte, filename string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &posError{file: filename, msg: "empty spec"}
		}
		return nil, yamlError(err, filename)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err, filename)
		}
		return nil, &posError{file: filename, line: extra.Line, msg: "more than one YAML document"}
	}
	if err := checkExpansion(&doc, filename); err != nil {
		return nil, err
	}
	root := resolve(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		if root.Tag == "!!null" {
			return nil, &posError{file: filename, msg: "empty spec"}
		}
		return nil, &posError{file: filename, line: root.Line, msg: "a spec must be a mapping of keys to values"}
	}
	return root, nil
}

// decodeSchemas fills the output_schema fields, which yaml.v3 skips (yaml:"-").
func decodeSchemas(root *yaml.Node, f *File, filename string) error {
	var errs []error
	one := func(n *yaml.Node, dst *[]byte) {
		v := lookup(n, "output_schema")
		if v == nil {
			return
		}
		raw, err := nodeJSON(v)
		if err != nil {
			errs = append(errs, &posError{file: filename, line: v.Line, msg: "output_schema: " + err.Error()})
			return
		}
		*dst = raw
	}
	agent := func(n *yaml.Node, a *Agent) {
		one(n, (*[]byte)(&a.OutputSchema))
		if h := lookup(n, "helper"); h != nil && h.Kind == yaml.MappingNode {
			one(h, (*[]byte)(&a.Helper.OutputSchema))
		}
	}
	agent(root, &f.Agent)
	if seq := lookup(root, "agents"); seq != nil && seq.Kind == yaml.SequenceNode {
		for i, n := range seq.Content {
			if i < len(f.Agents) {
				agent(resolve(n), &f.Agents[i])
			}
		}
	}
	return errors.Join(errs...)
}

// posError is a problem at a line of a file; line 0 means the whole file.
type posError struct {
	file string
	line int
	msg  string
}

func (e *posError) Error() string {
	if e.line == 0 {
		return e.file + ": " + e.msg
	}
	return e.file + ":" + strconv.Itoa(e.line) + ": " + e.msg
}

func (e *posError) Unwrap() error { return ErrInvalid }

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlError turns yaml.v3's "yaml: line 3: msg" and its multi-error TypeError
// into "file:3: msg" errors.
func yamlError(err error, filename string) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		pe := &posError{file: filename, msg: m}
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			pe.line, _ = strconv.Atoi(sub[1])
			pe.msg = sub[2]
		}
		errs = append(errs, pe)
	}
	return errors.Join(errs...)
}

// withFile prefixes every validation error, as Validate joins them, with
// the file name.
func withFile(err error, filename string) error {
	var out []error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		out = append(out, fmt.Errorf("%s: %w", filename, e))
	}
	return errors.Join(out...)
}
