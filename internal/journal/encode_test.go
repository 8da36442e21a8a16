package journal

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
)

// full is an entry with every encoded field set, found by reflection, so a
// field added to Entry (or to model.Usage) is covered by the round trip
// below.
func full(t *testing.T) Entry {
	t.Helper()
	var e Entry
	v := reflect.ValueOf(&e).Elem()
	var fill func(v reflect.Value, name string)
	fill = func(v reflect.Value, name string) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(name + "-value")
		case reflect.Int, reflect.Int64:
			v.SetInt(int64(len(name)) + 1)
		case reflect.Float64:
			v.SetFloat(float64(len(name)) + 0.5)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(time.Time{}) {
				v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
				return
			}
			for i := range v.NumField() {
				fill(v.Field(i), v.Type().Field(i).Name)
			}
		case reflect.Slice:
			// One element, itself full (Elided).
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fill(v.Index(0), name)
		case reflect.Pointer:
			// Encoded reflectively as they are; set by hand below.
		default:
			t.Fatalf("field %s of kind %s: fill it here", name, v.Kind())
		}
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Tag.Get("msgpack") == "-" {
			continue
		}
		fill(v.Field(i), f.Name)
	}
	e.Thread = &ThreadInfo{ID: "t", ParentID: "p", Name: "n", Path: "root/n", Depth: 1}
	e.Spec = &spec.Agent{Name: "helper", Instructions: "help", Tools: []string{"bash"}}
	e.Message = &model.Message{Role: model.RoleAssistant, Content: "hi", ToolCalls: []model.ToolCall{{ID: "c1", Name: "bash", Arguments: "{}"}}}
	return e
}

// TestEntryRoundTrip: an entry reads back as it was written, full, sparse
// or zero, and a start entry's thread too.
func TestEntryRoundTrip(t *testing.T) {
	for name, e := range map[string]Entry{
		"full":   full(t),
		"sparse": {Kind: KindTool, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Turn: 2, CallID: "c1", Result: "ok"},
		"elision": {Kind: KindElision, Turn: 9, Elided: []Elided{{Index: 3, CallID: "c1", Tool: "bash", Bytes: 8000}, {Index: 5, CallID: "c2", Tool: "grep", Bytes: 0}},
			Window: 32000, TokensBefore: 26000, TokensAfter: 15000},
		"summary": {Kind: KindSummary, Turn: 12, Summarized: 7, Content: "so far", Model: "openai:m", Usage: model.Usage{InputTokens: 9, OutputTokens: 2},
			Window: 32000, TokensBefore: 20000, TokensAfter: 9000},
		"zero": {},
		"root": {Kind: KindStart, Thread: &ThreadInfo{ID: "root", Name: "root", Path: "root"}},
	} {
		t.Run(name, func(t *testing.T) {
			data, err := msgpack.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var got Entry
			if err := msgpack.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(e, got); diff != "" {
				t.Errorf("(-written +read):\n%s", diff)
			}
			var keys map[string]msgpack.RawMessage
			if err := msgpack.Unmarshal(data, &keys); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"usage", "own", "thread", "system", "elided", "summarized", "window", "tokens_before", "tokens_after"} {
				if _, ok := keys[k]; ok && (name == "sparse" || name == "zero") {
					t.Errorf("empty %q written", k)
				}
			}
		})
	}
}

func BenchmarkEncodeEntry(b *testing.B) {
	e := Entry{Kind: KindModel, Time: time.Now(), Turn: 3, Model: "sim", Usage: model.Usage{InputTokens: 500, OutputTokens: 3},
		LatencyMS: 1, Message: &model.Message{Role: model.RoleAssistant, Content: "done"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := msgpack.Marshal(&e); err != nil {
			b.Fatal(err)
		}
	}
}
