package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

var rawJSONType = reflect.TypeFor[json.RawMessage]()

// checkKeys reports every mapping key under n that t has no field for, at the
// key's line. It follows the yaml tags (inline included) down through structs,
// slices and maps, so every nesting level is checked the same way. Fields
// tagged yaml:"-" of type json.RawMessage are known under their json name and
// not descended into: they hold free-form JSON. Type mismatches are left to
// the decoder.
func checkKeys(n *yaml.Node, t reflect.Type, filename string) []error {
	n = resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMerge(k) {
				for _, m := range mergeSources(v) {
					errs = append(errs, checkKeys(m, t, filename)...)
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, &posError{file: filename, line: k.Line, msg: fmt.Sprintf("unknown key %q", k.Value)})
				continue
			}
			if ft != nil {
				errs = append(errs, checkKeys(v, ft, filename)...)
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for _, e := range n.Content {
				errs = append(errs, checkKeys(e, t.Elem(), filename)...)
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				errs = append(errs, checkKeys(n.Content[i], t.Elem(), filename)...)
			}
		}
	}
	return errs
}

// yamlFields maps each YAML key of struct t to the field's type, or to nil for
// a free-form JSON field.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			if f.Type == rawJSONType {
				if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
					out[name] = nil
				}
			}
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				maps.Copy(out, yamlFields(ft))
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default key
		}
		out[name] = f.Type
	}
	return out
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isMerge(k *yaml.Node) bool { return k.Kind == yaml.ScalarNode && k.Tag == "!!merge" }

// mergeSources returns the mappings a "<<" key merges in.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = resolve(v)
	if v.Kind == yaml.SequenceNode {
		out := make([]*yaml.Node, 0, len(v.Content))
		for _, e := range v.Content {
			out = append(out, resolve(e))
		}
		return out
	}
	return []*yaml.Node{v}
}

// lookup returns the value of key in mapping n (own keys before merged ones),
// or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if isMerge(k) {
			merged = append(merged, mergeSources(n.Content[i+1])...)
			continue
		}
		if k.Value == key {
			return resolve(n.Content[i+1])
		}
	}
	for _, m := range merged {
		if v := lookup(m, key); v != nil {
			return v
		}
	}
	return nil
}
