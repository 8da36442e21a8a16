package event

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDurationMillisecondsEverywhere: latency_ms is the same integer of
// milliseconds in JSON (SSE, records) and in msgpack (NATS).
func TestDurationMillisecondsEverywhere(t *testing.T) {
	e := Event{Type: ModelCall, RunID: "r", Latency: Duration(29524 * time.Millisecond)}
	js, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var viaJSON map[string]any
	json.Unmarshal(js, &viaJSON)
	mp, err := msgpack.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var viaMsgpack struct {
		LatencyMS int64 `msgpack:"latency_ms"`
	}
	if err := msgpack.Unmarshal(mp, &viaMsgpack); err != nil {
		t.Fatal(err)
	}
	if viaJSON["latency_ms"] != float64(29524) {
		t.Errorf("JSON latency_ms = %v, want 29524", viaJSON["latency_ms"])
	}
	if viaMsgpack.LatencyMS != 29524 {
		t.Errorf("msgpack latency_ms = %d, want 29524", viaMsgpack.LatencyMS)
	}
	var back Event
	if err := msgpack.Unmarshal(mp, &back); err != nil || back.Latency != e.Latency {
		t.Errorf("msgpack round trip: %v, %v", back.Latency, err)
	}
}
