package wire

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// ErrorBody encodes err as an error message, keeping its code when it has one.
func ErrorBody(err error) []byte {
	var we *Error
	if !errors.As(err, &we) {
		we = &Error{Code: CodeInternal, Message: err.Error()}
	}
	return MustEncode(TypeError, we)
}

func sampleExec() ExecRequest {
	par := false
	return ExecRequest{
		Coordinator: "c1",
		Attempt:     2,
		Thread: thread.Thread{
			RunID: "r", ID: "t", ParentID: "p", Depth: 2, Path: "root/a/b", Name: "b", Task: "do it", Cwd: "/w",
			Agent: spec.Agent{Name: "b", Model: "sim", Tools: []string{"agent"}, ParallelToolCalls: &par,
				OutputSchema: []byte(`{"type":"object"}`), Harness: spec.Harness{Tools: []string{}},
				Helper: spec.Helper{Tools: spec.ToolPolicy{Policy: policy.Restrict, Only: []string{"agent"}}}},
			Permissions: policy.Permissions{{Default: policy.Ask, Rules: []policy.Rule{{Tool: "bash", Match: "git *", Decision: policy.Allow}}}},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	in := sampleExec()
	data, err := Encode(TypeExecRequest, in)
	if err != nil {
		t.Fatal(err)
	}
	var out ExecRequest
	if err := DecodeAs(data, TypeExecRequest, &out); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Fatalf("(-in +out)\n%s", d)
	}
	if out.Thread.Agent.Harness.Tools == nil {
		t.Fatal("an explicitly empty base tool list became nil (all tools)")
	}
	res := SpawnResult{ThreadID: "t", Result: thread.Result{Status: event.Succeeded, Output: "x"}}
	var got SpawnResult
	if err := DecodeAs(MustEncode(TypeSpawnResult, res), TypeSpawnResult, &got); err != nil || got != res {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	wrongVersion, _ := msgpack.Marshal(&Envelope{Type: TypeProgress, Version: 99})
	noType, _ := msgpack.Marshal(&Envelope{Version: Version})
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrBadMessage},
		{"garbage", []byte("hello, world"), ErrBadMessage},
		{"version", wrongVersion, ErrUnsupportedVersion},
		{"no type", noType, ErrBadMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.data); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	var x ExecRequest
	if err := DecodeAs(MustEncode(TypeProgress, Progress{}), TypeExecRequest, &x); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("wrong type: %v", err)
	}
	bad := MustEncode(TypeExecRequest, map[string]any{"thread": "not a thread"})
	if err := DecodeAs(bad, TypeExecRequest, &x); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("bad body: %v", err)
	}
}

func TestErrorReplyCrossesWire(t *testing.T) {
	data := ErrorBody(&Error{Code: CodeBusy, Message: "full"})
	var x SpawnResult
	err := DecodeAs(data, TypeSpawnResult, &x)
	if !errors.Is(err, ErrBusy) || err.Error() != "busy: full" {
		t.Fatalf("got %v", err)
	}
	if err := DecodeAs(ErrorBody(errors.New("boom")), TypeSpawnResult, &x); err == nil || err.Error() != "internal: boom" {
		t.Fatalf("got %v", err)
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder a network peer can reach.
func FuzzDecode(f *testing.F) {
	f.Add(MustEncode(TypeExecRequest, sampleExec()))
	f.Add(MustEncode(TypeExecRequest, sampleExecByHash(true)))
	f.Add(MustEncode(TypeExecSetupMissing, ExecSetupMissing{Worker: "w", SetupHash: "h"}))
	f.Add(MustEncode(TypeSpawnRequest, SpawnRequest{RunID: "r", Name: "n", Task: "t"}))
	f.Add(MustEncode(TypeWorkerHeartbeat, WorkerHeartbeat{ID: "w", Slots: 4}))
	f.Add(MustEncode(TypeApprovalRequest, ApprovalRequest{ApprovalRequest: policy.ApprovalRequest{RunID: "r", Tool: "bash"}, Token: "t"}))
	f.Add(MustEncode(TypeCoordHeartbeat, CoordHeartbeat{ID: "c", Epoch: "e", Fenced: []Fenced{{Worker: "w", ThreadID: "t", Attempt: 1}}}))
	f.Add(MustEncode(TypeRunSubmit, RunSubmit{RunID: "r", Task: "t"}))
	f.Add(MustEncode(TypeApprovalDecide, ApprovalDecide{ID: "a", Allow: true}))
	f.Add(MustEncode(TypePlacementCheck, PlacementCheck{RunID: "r", ThreadID: "t", Token: "k"}))
	f.Add(MustEncode(TypeProgress, Progress{Token: "t", Events: Events{{Type: event.ToolCall, Tool: "bash", Arguments: "{}"}}}))
	f.Add(MustEncode(TypeRunCancel, RunCancel{RunID: "r", Resumes: 2}))
	f.Add(MustEncode(TypeRunResume, RunResume{RunID: "r"}))
	f.Add(ErrorBody(errors.New("x")))
	entry := MustEncode(TypeJournalEntry, journal.Entry{Kind: journal.KindModel, Turn: 1,
		Message: &model.Message{Role: model.RoleAssistant, Content: "hi", ToolCalls: []model.ToolCall{{ID: "c", Name: "bash"}}}})
	f.Add(entry)
	f.Add(MustEncode(TypeJournalBatch, journalBatch{Entries: [][]byte{entry, entry}}))
	f.Add([]byte{0x83, 0xa1, 't'})
	for _, b := range bombs() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := Decode(data)
		if err != nil {
			return
		}
		targets := map[Type]any{
			TypeSpawnRequest: &SpawnRequest{}, TypeSpawnResult: &SpawnResult{}, TypeExecRequest: &ExecRequest{},
			TypeExecAccepted: &ExecAccepted{}, TypeExecBusy: &ExecBusy{}, TypeProgress: &Progress{},
			TypeExecResult: &ExecResult{}, TypeCancel: &ThreadCancel{}, TypeApprovalRequest: &ApprovalRequest{},
			TypeApprovalDecision: &policy.Approval{}, TypeWorkerHeartbeat: &WorkerHeartbeat{},
			TypeCoordHeartbeat: &CoordHeartbeat{}, TypeRunSubmit: &RunSubmit{}, TypeRunAccepted: &RunAccepted{},
			TypeEvent: &event.Event{}, TypeError: &Error{}, TypeApprovalDecide: &ApprovalDecide{},
			TypePlacementCheck: &PlacementCheck{}, TypeThreadSetup: &ThreadSetup{}, TypeExecSetupMissing: &ExecSetupMissing{},
			TypeRunCancel: &RunCancel{}, TypeRunResume: &RunResume{},
			TypeJournalEntry: &journal.Entry{}, TypeJournalBatch: &journalBatch{},
		}
		for typ, v := range targets {
			_ = env.Into(typ, v)
		}
		// An exec request may carry its setup, encoded alone.
		var ex ExecRequest
		if env.Into(TypeExecRequest, &ex) == nil && ex.Setup != nil {
			_ = DecodeAs(ex.Setup, TypeThreadSetup, &ThreadSetup{})
		}
		// A worker's journal batch holds entries encoded alone.
		var b journalBatch
		if env.Into(TypeJournalBatch, &b) == nil {
			for _, d := range b.Entries {
				if e, err := Decode(d); err == nil {
					_ = e.Into(TypeJournalEntry, &journal.Entry{})
				}
			}
		}
	})
}

func BenchmarkEncodeDecodeExec(b *testing.B) {
	in := sampleExec()
	b.ReportAllocs()
	for b.Loop() {
		data, _ := Encode(TypeExecRequest, in)
		var out ExecRequest
		if err := DecodeAs(data, TypeExecRequest, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// journalBatch has the shape of the store's journal batch body.
type journalBatch struct {
	Entries [][]byte `msgpack:"e"`
}

// TestSetupHash: a setup's hash leaves out the agent's name (siblings share
// one setup), does not depend on map order, and changes with anything else.
func TestSetupHash(t *testing.T) {
	base := sampleExec().Thread
	base.Agent.ModelArgs = model.Args{"temperature": 0.2, "max_tokens": 100.0, "top_p": 0.9, "stop": "END"}
	hash, body := EncodeSetup(&base)
	sibling := base
	sibling.Agent.Name, sibling.Name, sibling.ID, sibling.Task = "c", "c", "t2", "other task"
	for range 20 { // maps iterate in a new order each time
		sibling.Agent.ModelArgs = maps.Clone(base.Agent.ModelArgs)
		if h, _ := EncodeSetup(&sibling); h != hash {
			t.Fatal("a sibling's setup hashes apart from its own")
		}
	}
	if SetupHash(body) != hash {
		t.Error("SetupHash of the encoded setup is not its hash")
	}
	other := base
	other.Permissions = nil
	if h, _ := EncodeSetup(&other); h == hash {
		t.Error("a setup without the permissions hashes like one with them")
	}
	var got ThreadSetup
	if err := DecodeAs(body, TypeThreadSetup, &got); err != nil {
		t.Fatal(err)
	}
	stripped := base
	StripSetup(&stripped)
	SetSetup(&stripped, &got)
	if diff := cmp.Diff(base, stripped, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("thread without its setup, then with it (-want +got):\n%s", diff)
	}
}

// A message decoded as another type than its own is refused, naming its
// type.
func TestDecodeAsRefusesAnotherType(t *testing.T) {
	data := MustEncode(TypeExecBusy, ExecBusy{})
	var out ExecBusy
	if err := DecodeAs(data, TypeExecBusy, &out); err != nil {
		t.Fatal(err)
	}
	var other ExecBusy
	err := DecodeAs(data, TypeExecAccepted, &other)
	if we := new(Error); !errors.As(err, &we) || we.Code != CodeUnknownType || !strings.Contains(we.Message, string(TypeExecBusy)) {
		t.Fatalf("decoding as another type: %v", err)
	}
}
