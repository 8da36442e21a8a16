package wire

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

// fillLeaves sets every exported leaf field of v that crosses the wire (not
// tagged "-") to a value derived from its name, at any depth: a field added
// to a message is then covered by the round trip below. Events are set
// apart (sampleEvents): they carry only what a worker may say.
func fillLeaves(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, len(name), time.UTC)))
		return
	case reflect.TypeFor[Events]():
		v.Set(reflect.ValueOf(sampleEvents()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(name + "-value")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(len(name)) + 1000)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(len(name)) + 1000)
	case reflect.Float64:
		v.SetFloat(float64(len(name)) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillLeaves(t, p.Elem(), name)
		v.Set(p)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		val := reflect.New(v.Type().Elem()).Elem()
		if val.Kind() == reflect.Interface {
			val.Set(reflect.ValueOf(any(1.5)))
		} else {
			fillLeaves(t, val, name)
		}
		m.SetMapIndex(reflect.ValueOf(name+"-key").Convert(v.Type().Key()), val)
		v.Set(m)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`{"type":"object"}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillLeaves(t, s.Index(i), name)
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Tag.Get("msgpack") == "-" || !f.IsExported() {
				continue
			}
			fillLeaves(t, v.Field(i), f.Name)
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf(name + "-any"))
	default:
		t.Fatalf("field %s of kind %s: fill it here", name, v.Kind())
	}
}

func sampleEvents() Events {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return Events{
		{Type: event.ModelCall, Time: at, Model: "sim", Usage: model.Usage{InputTokens: 12, OutputTokens: 7}, Latency: event.Duration(time.Millisecond)},
		{Type: event.ToolCall, Time: at, Tool: "bash", CallID: "c1", Arguments: `{"command":"ls"}`},
	}
}

// tagKeys are the map keys the msgpack tags of struct type typ give a
// value whose every field is set: inline structs' keys included.
func tagKeys(typ reflect.Type) []string {
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("msgpack")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case tag == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			keys = append(keys, tagKeys(f.Type)...)
		case name == "":
			keys = append(keys, f.Name)
		default:
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestMessagesRoundTrip: every message a peer sends decodes as it was
// written, zero and with every field set, and a full one is a map with the
// keys its msgpack tags name.
func TestMessagesRoundTrip(t *testing.T) {
	for typ, body := range map[Type]any{
		TypeSpawnRequest: &SpawnRequest{}, TypeSpawnResult: &SpawnResult{}, TypeExecRequest: &ExecRequest{},
		TypeExecAccepted: &ExecAccepted{}, TypeExecBusy: &ExecBusy{}, TypeProgress: &Progress{},
		TypeExecResult: &ExecResult{}, TypeCancel: &Cancel{}, "thread.cancel": &ThreadCancel{},
		TypeApprovalRequest: &ApprovalRequest{}, TypeApprovalDecision: &policy.Approval{},
		TypeApprovalDecide: &ApprovalDecide{}, TypeWorkerHeartbeat: &WorkerHeartbeat{},
		TypeCoordHeartbeat: &CoordHeartbeat{}, TypeRunSubmit: &RunSubmit{}, TypeRunAccepted: &RunAccepted{},
		TypeRunCancel: &RunCancel{}, TypeRunResume: &RunResume{}, TypeRunResult: &RunResult{},
		TypeBudgetRenew: &BudgetRenew{}, TypePlacementCheck: &PlacementCheck{},
		TypeThreadSetup: &ThreadSetup{}, TypeExecSetupMissing: &ExecSetupMissing{},
		TypeQuotaTake: &QuotaTake{}, TypeQuotaWaiting: &QuotaWaiting{}, TypeQuotaDone: &QuotaDone{},
		TypeBudgetGrant: &limits.Grant{}, TypeJournalEntry: &journal.Entry{}, TypeError: &Error{},
	} {
		t.Run(string(typ), func(t *testing.T) {
			rt := reflect.TypeOf(body).Elem()
			full := reflect.New(rt)
			fillLeaves(t, full.Elem(), rt.Name())
			for name, in := range map[string]any{"zero": body, "full": full.Interface()} {
				data, err := Encode(typ, in)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				out := reflect.New(rt)
				if err := DecodeAs(data, typ, out.Interface()); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if d := cmp.Diff(in, out.Interface()); d != "" {
					t.Errorf("%s (-in +out):\n%s", name, d)
				}
			}
			env, err := Decode(MustEncode(typ, full.Interface()))
			if err != nil {
				t.Fatal(err)
			}
			var asMap map[string]msgpack.RawMessage
			if err := msgpack.Unmarshal(env.Body, &asMap); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range asMap {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if want := tagKeys(rt); !slices.Equal(keys, want) {
				t.Errorf("keys %v, want %v", keys, want)
			}
		})
	}
}

// Strings of every length, past each msgpack string width, decode as they
// were written.
func TestStringsOfEveryLength(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536, 70000} {
		in := ExecAccepted{Worker: strings.Repeat("w", n)}
		var out ExecAccepted
		if err := DecodeAs(MustEncode(TypeExecAccepted, in), TypeExecAccepted, &out); err != nil || out != in {
			t.Errorf("length %d: got %d bytes (%v)", n, len(out.Worker), err)
		}
	}
}

// A string header that claims more than the message holds is refused,
// whatever its width, by Check and by the decoder.
func TestForgedStringLengthsAreRefused(t *testing.T) {
	for _, data := range [][]byte{
		{0xa5, 'a', 'b'},                         // fixstr of 5, 2 bytes
		{0xd9, 200, 'a'},                         // str8 of 200, 1 byte
		{0xda, 0xff, 0xff, 'a'},                  // str16 of 65535
		{0xdb, 0xff, 0xff, 0xff, 0xff, 'a', 'b'}, // str32 of 4 GiB
		{0xc4, 0x10, 'a'},                        // bin8 of 16
	} {
		if Check(data) == nil {
			t.Errorf("% x passes Check", data)
		}
		var s string
		if err := msgpack.Unmarshal(data, &s); err == nil {
			t.Errorf("% x decoded as %q", data, s)
		}
	}
	var s string
	if err := msgpack.Unmarshal([]byte{0xd4, 0x01, 0x02}, &s); err == nil { // an extension, not a string
		t.Errorf("an extension decoded as %q", s)
	}
}
