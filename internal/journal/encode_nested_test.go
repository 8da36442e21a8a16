package journal

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
)

// leaves fills every leaf field of a T found by reflection: each has one
// value per leaf with that leaf alone set, full has all of them set. A
// field added to T, at any depth, is then written by the hand encoder or
// fails the test below.
func leaves[T any](t testing.TB) (each []T, full T) {
	t.Helper()
	var fill func(v reflect.Value, name string, only int, n *int)
	fill = func(v reflect.Value, name string, only int, n *int) {
		leaf := func(set func()) {
			if only < 0 || only == *n {
				set()
			}
			*n++
		}
		switch v.Kind() {
		case reflect.String:
			leaf(func() { v.SetString(name + "-value") })
		case reflect.Int, reflect.Int64:
			leaf(func() { v.SetInt(int64(len(name)) + 1000) })
		case reflect.Bool:
			leaf(func() { v.SetBool(true) })
		case reflect.Pointer:
			leaf(func() {
				p := reflect.New(v.Type().Elem())
				var m int
				fill(p.Elem(), name, -1, &m)
				v.Set(p)
			})
		case reflect.Map:
			leaf(func() {
				m := reflect.MakeMap(v.Type())
				m.SetMapIndex(reflect.ValueOf(name+"-key"), reflect.ValueOf(any(1.5)))
				v.Set(m)
			})
		case reflect.Slice:
			if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
				leaf(func() { v.SetBytes([]byte(`{"type":"object"}`)) })
				return
			}
			leaf(func() {
				s := reflect.MakeSlice(v.Type(), 2, 2)
				for i := range 2 {
					var m int
					fill(s.Index(i), name, -1, &m)
				}
				v.Set(s)
			})
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).Tag.Get("msgpack") == "-" {
					continue
				}
				fill(v.Field(i), v.Type().Field(i).Name, only, n)
			}
		default:
			t.Fatalf("field %s of kind %s: fill it here", name, v.Kind())
		}
	}
	var leaves int
	fill(reflect.ValueOf(&full).Elem(), "agent", -1, &leaves)
	for i := range leaves {
		var a T
		var n int
		fill(reflect.ValueOf(&a).Elem(), "agent", i, &n)
		each = append(each, a)
	}
	return each, full
}

// matchesReflective checks that hand writes each case as the reflective
// encoder does, byte for byte.
func matchesReflective[T any](t *testing.T, cases []T, hand func(*writer, *T)) {
	t.Helper()
	for i, v := range cases {
		want, err := msgpack.Marshal(&v)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := writer{enc: msgpack.NewEncoder(&buf)}
		hand(&w, &v)
		if w.err != nil {
			t.Fatal(w.err)
		}
		if got := buf.Bytes(); !bytes.Equal(want, got) {
			var back T
			err := msgpack.Unmarshal(got, &back)
			t.Errorf("case %d: hand encoding differs from the reflective one (decode err %v):\n%s", i, err, cmp.Diff(v, back))
		}
	}
}

// TestEncodeNestedMatchesTheTags: the journal's hand encodings of an agent
// spec and of a message are byte for byte the reflective encoder's: zero,
// with every field set, with each field set alone, and (a spec) a harness
// whose base tools are none (an empty list, not nil).
func TestEncodeNestedMatchesTheTags(t *testing.T) {
	each, full := leaves[spec.Agent](t)
	if len(each) < 37 {
		t.Fatalf("found %d leaf fields of a spec; the filler misses some", len(each))
	}
	none := spec.Agent{Name: "n", Harness: spec.Harness{Tools: []string{}}}
	rule := spec.Agent{Harness: spec.Harness{Permissions: policy.Permission{Rules: []policy.Rule{{Tool: "bash", Decision: policy.Allow}}}}}
	matchesReflective(t, append([]spec.Agent{{}, full, none, rule, spec.HelperSpec(full, "h")}, each...), (*writer).agent)

	msgs, fullMsg := leaves[model.Message](t)
	if len(msgs) < 6 {
		t.Fatalf("found %d leaf fields of a message; the filler misses some", len(msgs))
	}
	redacted := model.Message{Role: model.RoleAssistant, Reasoning: []model.Reasoning{{Redacted: "opaque"}, {Text: "t"}}}
	matchesReflective(t, append([]model.Message{{}, fullMsg, redacted}, msgs...), (*writer).message)
}

func BenchmarkEncodeAgent(b *testing.B) {
	_, full := leaves[spec.Agent](b)
	a := spec.HelperSpec(full, "h")
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			w := writer{enc: enc}
			w.agent(&a)
		}
	})
	b.Run("reflective", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(&a)
		}
	})
}
