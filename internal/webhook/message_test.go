package webhook

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// A run's messages: one per distinct URL, ids that differ by URL, run and
// resume and are the same when built again, the output cut on a rune.
func TestForRun(t *testing.T) {
	now := time.Date(2026, 12, 5, 22, 0, 0, 0, time.UTC)
	rec := record.Run{RunID: "r1", Status: event.Succeeded, Output: strings.Repeat("é", MaxOutput), FinishedAt: now}
	urls := []string{"https://a.example/h", "https://b.example/h", "https://a.example/h"}
	ms, err := ForRun(rec, urls)
	if err != nil || len(ms) != 2 {
		t.Fatalf("%d messages, %v; want 2", len(ms), err)
	}
	again, _ := ForRun(rec, urls)
	rec.Resumes = 1
	resumed, _ := ForRun(rec, urls)
	other := rec
	other.RunID, other.Resumes = "r2", 0
	r2, _ := ForRun(other, urls)
	ids := map[string]bool{}
	for _, m := range [][]Message{ms, resumed, r2} {
		for _, x := range m {
			ids[x.ID] = true
		}
	}
	if len(ids) != 6 || ms[0].ID != again[0].ID || ms[1].ID != again[1].ID {
		t.Errorf("ids %v: want 6 distinct, stable when rebuilt", ids)
	}
	var p struct {
		Type      string
		Timestamp time.Time
		Data      RunData
	}
	if err := json.Unmarshal(ms[0].Body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != RunFinished || !p.Timestamp.Equal(now) || !p.Data.OutputTruncated ||
		len(p.Data.Output) > MaxOutput || !utf8.ValidString(p.Data.Output) {
		t.Errorf("payload %s %v truncated %v, %d bytes of output", p.Type, p.Timestamp, p.Data.OutputTruncated, len(p.Data.Output))
	}
	if _, err := ForRun(record.Run{RunID: "r3", Status: event.Running}, urls); err == nil {
		t.Error("a message for a run not final")
	}
	as, err := ForApproval(ApprovalData{ID: "a1", RunID: "r1", Tool: "bash", RequestedAt: now}, urls[:1])
	if err != nil || len(as) != 1 || as[0].ID == ms[0].ID || as[0].RunID != "r1" {
		t.Errorf("approval messages %+v, %v", as, err)
	}
}
