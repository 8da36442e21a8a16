package store

import (
	"context"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
)

// benchHelperEntries are what a one-turn helper journals, as the bench's
// helpers do (sim model): its start, its model response, its end.
func benchHelperEntries() []journal.Entry {
	parallel := false
	parent := spec.Agent{Name: "bench", Model: "sim", Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	a := spec.HelperSpec(parent, "part-1")
	return []journal.Entry{
		{Kind: journal.KindStart, Thread: &journal.ThreadInfo{ID: "0b4c1d2e-5f60-4718-8a9b-0c1d2e3f4a5b", ParentID: "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
			Name: "part-1", Path: "formica/part-1", Depth: 1}, System: a.Instructions, Task: "part 1", Spec: &a, Model: "sim"},
		{Kind: journal.KindModel, Model: "sim", Usage: model.Usage{InputTokens: 120, OutputTokens: 9}, LatencyMS: 1,
			Message: &model.Message{Role: model.RoleAssistant, Content: "Done: part 1."}},
		{Kind: journal.KindEnd, Status: event.Succeeded, Output: "Done: part 1.",
			Usage: model.Usage{InputTokens: 120, OutputTokens: 9}, Own: model.Usage{InputTokens: 120, OutputTokens: 9}},
	}
}

// BenchmarkJournalEncode: encoding each entry of a one-turn helper, as a
// writer does in Append.
func BenchmarkJournalEncode(b *testing.B) {
	s, _ := openStore(b, Config{})
	for _, e := range benchHelperEntries() {
		b.Run(string(e.Kind), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.encodeEntry(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJournalWriteHelper: the journal writes of one one-turn helper
// on a real server: its entries appended to a batched writer, sent as one
// message and stored (Sync waits for the ack); under a bare token digest
// (journals before proofs) and under a placement proof, as workers write
// now.
func BenchmarkJournalWriteHelper(b *testing.B) {
	s, _ := openStore(b, Config{})
	entries := benchHelperEntries()
	ctx := context.Background()
	signer, _ := journal.NewSigner()
	for _, proof := range []string{"", signer.Sign("run-bench", "thread-bench", "w1", 1, "token")} {
		name := "digest"
		if proof != "" {
			name = "proof"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := s.Journal("run-bench", "thread-bench", "token", false).Proven(proof).Batched(JournalLinger)
				for _, e := range entries {
					w.Append(e)
				}
				if err := w.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadJournalProof: reading a one-turn helper's journal back (one
// message under its placement's proof), the proof checked against the
// published key, as a replay or a transcript does.
func BenchmarkReadJournalProof(b *testing.B) {
	s, _ := openStore(b, Config{})
	ctx := context.Background()
	signer, _ := journal.NewSigner()
	if err := s.PublishPlacementKey(ctx, signer); err != nil {
		b.Fatal(err)
	}
	w := s.Journal("run-bench", "thread-bench", "token", false).Proven(signer.Sign("run-bench", "thread-bench", "w1", 1, "token")).Batched(JournalLinger)
	for _, e := range benchHelperEntries() {
		w.Append(e)
	}
	if err := w.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.ReadJournal(ctx, "run-bench", "thread-bench")
		if err != nil || len(journal.Trusted(got)) != 3 {
			b.Fatalf("read %d entries: %v", len(got), err)
		}
	}
}
