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

// plain is Entry without its encoder: what the reflective encoder writes.
type plain Entry

// full is an entry with every encoded field set, found by reflection, so a
// field added to Entry (or to model.Usage) that EncodeMsgpack does not
// write fails the test below.
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

// TestEncodeMatchesTheTags: an entry written by EncodeMsgpack reads back as
// the reflective encoding of the same entry does, full or sparse.
func TestEncodeMatchesTheTags(t *testing.T) {
	for name, e := range map[string]Entry{
		"full":   full(t),
		"sparse": {Kind: KindTool, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Turn: 2, CallID: "c1", Result: "ok"},
		"zero":   {},
	} {
		t.Run(name, func(t *testing.T) {
			custom, err := msgpack.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			reflective, err := msgpack.Marshal(plain(e))
			if err != nil {
				t.Fatal(err)
			}
			var got, want Entry
			if err := msgpack.Unmarshal(custom, &got); err != nil {
				t.Fatal(err)
			}
			if err := msgpack.Unmarshal(reflective, (*plain)(&want)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decoded (-reflective +custom):\n%s", diff)
			}
			if name == "full" && len(custom) < len(reflective)*9/10 {
				t.Errorf("custom encoding %d bytes, reflective %d: a field is missing", len(custom), len(reflective))
			}
		})
	}
}

// plainThread is ThreadInfo without its encoder.
type plainThread ThreadInfo

func TestEncodeThreadInfoMatchesTheTags(t *testing.T) {
	for _, ti := range []ThreadInfo{{ID: "t", ParentID: "p", Name: "n", Path: "root/n", Depth: 2}, {ID: "root", Name: "root", Path: "root"}} {
		custom, err := msgpack.Marshal(ti)
		if err != nil {
			t.Fatal(err)
		}
		reflective, err := msgpack.Marshal(plainThread(ti))
		if err != nil {
			t.Fatal(err)
		}
		var got, want ThreadInfo
		if err := msgpack.Unmarshal(custom, &got); err != nil {
			t.Fatal(err)
		}
		if err := msgpack.Unmarshal(reflective, (*plainThread)(&want)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" || got != ti {
			t.Errorf("decoded (-reflective +custom):\n%s", diff)
		}
	}
	if n := reflect.TypeOf(ThreadInfo{}).NumField(); n != 5 {
		t.Errorf("ThreadInfo has %d fields; EncodeMsgpack writes 5", n)
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

func BenchmarkEncodeEntryReflective(b *testing.B) {
	e := plain{Kind: KindModel, Time: time.Now(), Turn: 3, Model: "sim", Usage: model.Usage{InputTokens: 500, OutputTokens: 3},
		LatencyMS: 1, Message: &model.Message{Role: model.RoleAssistant, Content: "done"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := msgpack.Marshal(&e); err != nil {
			b.Fatal(err)
		}
	}
}
