package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
)

// The printed transcript shows elisions and summaries where they are.
func TestPrintTranscriptShowsRoomMade(t *testing.T) {
	var tr api.Transcript
	tr.Path, tr.ThreadID, tr.Status = "root", "t1", "succeeded"
	tr.Entries = []journal.Entry{
		{Kind: journal.KindTool, Tool: "bash", CallID: "call_1", ToolStatus: "ok", Result: "out"},
		{Kind: journal.KindElision, Turn: 14, Window: 32000, TokensBefore: 26000, TokensAfter: 15800,
			Elided: []journal.Elided{{Index: 3, CallID: "call_1", Tool: "bash", Bytes: 8000}, {Index: 5, CallID: "call_2", Tool: "bash", Bytes: 8000}}},
		{Kind: journal.KindSummary, Turn: 20, Summarized: 9, Content: "what happened", Model: "openai:m",
			Usage: model.Usage{InputTokens: 900, OutputTokens: 40}, Window: 32000, TokensBefore: 26000, TokensAfter: 9000},
	}
	var b bytes.Buffer
	printTranscript(&b, tr)
	for _, want := range []string{
		"-- elided 2 old tool results (16000 bytes) before turn 14 to fit the context window: about 26000 -> 15800 of 32000 tokens\n",
		"     bash [call_1] 8000 bytes\n",
		"== summary of 9 earlier messages before turn 20 (openai:m, 900 in / 40 out): about 26000 -> 9000 of 32000 tokens\nwhat happened\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, b.String())
		}
	}
}
