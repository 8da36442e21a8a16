package event

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// TestAppendJSONIsEncodingJSON: the hand-written encoder writes the bytes
// encoding/json writes, for every field set and unset and every string
// that needs escaping.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 17, 4, 5, 123456789, time.UTC)
	odd := "a\"b\\c\n\r\t\b\f\x00\x1f\x7f<>&\u2028\u2029é\xff\xc3(日本"
	for name, e := range map[string]Event{
		"empty": {},
		"run":   {Type: RunStarted, Time: at, RunID: "r", ThreadID: "t", Name: "root"},
		"zone":  {Type: ModelCall, Time: at.In(time.FixedZone("x", -(3*3600 + 30*60)))},
		"all": {Type: ToolResult, Time: at, RunID: "r", ThreadID: "t", ParentID: "p", Depth: 3, Name: "n",
			Status: Succeeded, Reason: "why", Worker: "w", Model: "sim", Usage: model.Usage{InputTokens: 1, OutputTokens: -2},
			Latency: Duration(1500 * time.Millisecond), Tool: "bash", CallID: "c1", Arguments: `{"x":1}`, Output: "out", Decision: "allow"},
		"usage in":  {Type: ModelCall, Usage: model.Usage{InputTokens: 7}},
		"usage out": {Type: ModelCall, Usage: model.Usage{OutputTokens: 7}},
		"sub ms":    {Type: ModelCall, Latency: Duration(time.Microsecond)},
		"negative":  {Type: ModelCall, Depth: -1, Latency: Duration(-2 * time.Second)},
		"escapes": {Type: Type(odd), RunID: odd, ThreadID: odd, ParentID: odd, Name: odd, Status: Status(odd), Reason: odd,
			Worker: odd, Model: odd, Tool: odd, CallID: odd, Arguments: odd, Output: odd, Decision: odd},
	} {
		t.Run(name, func(t *testing.T) { sameAsEncodingJSON(t, e) })
	}
}

// TestAppendJSONRefusesWhatJSONRefuses: a time RFC 3339 cannot hold fails
// both encoders.
func TestAppendJSONRefusesWhatJSONRefuses(t *testing.T) {
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 24*3600))} {
		e := Event{Type: ModelCall, Time: at}
		if _, err := json.Marshal(e); err == nil {
			t.Fatalf("encoding/json took %v", at)
		}
		if b, err := Marshal(e); err == nil {
			t.Errorf("Marshal(%v) = %s, want an error", at, b)
		}
	}
}

func sameAsEncodingJSON(t *testing.T, e Event) {
	t.Helper()
	want, werr := json.Marshal(e)
	got, gerr := AppendJSON([]byte("prefix"), &e)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("errors: encoding/json %v, AppendJSON %v", werr, gerr)
	}
	if werr != nil {
		return
	}
	if string(got) != "prefix"+string(want) {
		t.Fatalf("AppendJSON:\n got %s\nwant prefix%s", got, want)
	}
}

// FuzzAppendJSON: for any texts, numbers and times, the hand-written
// encoder and encoding/json agree byte for byte.
func FuzzAppendJSON(f *testing.F) {
	f.Add("tool.call", "r", "t", "n", "bash", `{"command":"ls"}`, "a\n<b>\xff", int64(1), int64(2), int64(1500), int64(1764608645123456789), 0)
	f.Add("", "", "", "", "", "", "", int64(0), int64(0), int64(0), int64(0), 0)
	f.Add("x", "\u2028", "\u2029", "\x00", "\x7f", "é", "\xc3", int64(-1), int64(-1), int64(-1), int64(-62135596800000000), -3600)
	f.Fuzz(func(t *testing.T, typ, run, thread, name, tool, args, out string, in, outTok, latency, unixNano int64, zone int) {
		e := Event{Type: Type(typ), Time: time.Unix(0, unixNano).In(time.FixedZone("z", zone%(48*3600))), RunID: run,
			ThreadID: thread, ParentID: name, Depth: int(in), Name: name, Status: Status(out), Reason: args, Worker: tool,
			Model: typ, Usage: model.Usage{InputTokens: in, OutputTokens: outTok}, Latency: Duration(latency), Tool: tool,
			CallID: thread, Arguments: args, Output: out, Decision: run}
		sameAsEncodingJSON(t, e)
	})
}
