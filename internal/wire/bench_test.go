package wire

import (
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/thread"
)

// The messages of one spawn, besides the ExecRequest of
// BenchmarkEncodeDecodeExec: the parent's request to the coordinator, the
// helper's result, and the events a helper's run publishes (half of the
// messages a spawn sends, see BENCHMARKS.md).

func BenchmarkEncodeDecodeSpawnRequest(b *testing.B) {
	ex := sampleExec()
	th := ex.Thread
	in := SpawnRequest{RunID: th.RunID, ParentID: th.ParentID, Token: "q1bXk2s9Vd3xYz0aBcDeFg", CallID: "call_7f3a9c",
		Name: th.Name, Task: th.Task}
	b.ReportAllocs()
	for b.Loop() {
		data, _ := Encode(TypeSpawnRequest, in)
		var out SpawnRequest
		if err := DecodeAs(data, TypeSpawnRequest, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDecodeSpawnResult(b *testing.B) {
	in := SpawnResult{ThreadID: "0b9e0c57-0d54-4a43-9d1c-1c2f3b7e6a10", Worker: "host-1a2b3c4d",
		Result: thread.Result{Status: event.Succeeded, Output: "done: part 1", Usage: model.Usage{InputTokens: 120, OutputTokens: 3}}}
	b.ReportAllocs()
	for b.Loop() {
		data, _ := Encode(TypeSpawnResult, in)
		var out SpawnResult
		if err := DecodeAs(data, TypeSpawnResult, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// sampleExecByHash is sampleExec as a coordinator sends it once the
// worker holds its setup (withSetup: the first time, with it).
func sampleExecByHash(withSetup bool) ExecRequest {
	in := sampleExec()
	hash, body := EncodeSetup(&in.Thread)
	StripSetup(&in.Thread)
	in.SetupHash = hash
	if withSetup {
		in.Setup = body
	}
	return in
}

// BenchmarkEncodeDecodeExecByHash is the ExecRequest of a helper whose
// setup the worker holds: the thread without its setup, and the hash.
func BenchmarkEncodeDecodeExecByHash(b *testing.B) {
	in := sampleExecByHash(false)
	b.ReportAllocs()
	for b.Loop() {
		data, _ := Encode(TypeExecRequest, in)
		var out ExecRequest
		if err := DecodeAs(data, TypeExecRequest, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeEvent is what a worker pays per event it publishes.
func BenchmarkEncodeEvent(b *testing.B) {
	e := event.Event{Type: event.ModelCall, Time: time.Now(), RunID: "1c9d4f1e-4a0f-4e51-9f0a-3a7b1f2c9d10",
		ThreadID: "0b9e0c57-0d54-4a43-9d1c-1c2f3b7e6a10", ParentID: "7f3e2d1c-0b9a-4876-8543-210fedcba987", Depth: 1,
		Name: "part-1", Model: "sim", Usage: model.Usage{InputTokens: 120, OutputTokens: 3}, Latency: event.Duration(time.Millisecond)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(TypeEvent, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckExec is the bound check of an ExecRequest, part of every
// decode in BenchmarkEncodeDecodeExec.
func BenchmarkCheckExec(b *testing.B) {
	data, _ := Encode(TypeExecRequest, sampleExec())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(data); err != nil {
			b.Fatal(err)
		}
	}
}
