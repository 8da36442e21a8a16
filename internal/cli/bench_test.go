package cli_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchWritesTableAndJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.json")
	r := formica(t, nil, "bench", "--quick", "--scenario", "floors", "--json", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"floors", "goroutine + channel reply", "NATS in-process", "NATS TCP loopback"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table has no %q:\n%s", want, r.stdout)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	floors, _ := doc["floors"].(map[string]any)
	for _, k := range []string{"goroutine", "nats_inproc", "nats_tcp"} {
		if _, ok := floors[k].(map[string]any); !ok {
			t.Errorf("floors.%s missing: %s", k, b)
		}
	}
	// Ratios of scenarios that did not run are present and null.
	if v, ok := doc["spawn_p50_ratio_inproc"]; !ok || v != nil {
		t.Errorf("spawn_p50_ratio_inproc = %v, %v", v, ok)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--scenario", "nope"},
		{"bench", "--workers", "-1"},
		{"bench", "extra"},
	} {
		if r := formica(t, nil, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
	if r := formica(t, nil, "bench", "--role", "nope"); r.code != 1 || !strings.Contains(r.stderr, "--role") {
		t.Errorf("bad role: exit %d\n%s", r.code, r.stderr)
	}
}

// TestBenchRounds runs the spawn scenario twice: the JSON's top-level ratio
// and guard value are the medians (of two: the mean) of the rounds' own.
func TestBenchRounds(t *testing.T) {
	if r := formica(t, nil, "bench", "--rounds", "0"); r.code != 2 || !strings.Contains(r.stderr, "--rounds must be at least 1") {
		t.Errorf("--rounds 0: exit %d\n%s", r.code, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	r := formica(t, nil, "bench", "--quick", "--rounds", "2", "--scenario", "spawn", "--json", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "round 2 of 2") || !strings.Contains(r.stdout, "over 2 rounds") {
		t.Errorf("table shows no rounds:\n%s", r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Name        string    `json:"name"`
		Value       float64   `json:"value"`
		RoundValues []float64 `json:"round_values"`
	}
	type result struct {
		Ratio   *float64 `json:"spawn_p50_ratio_inproc"`
		Targets []target `json:"targets"`
		Rounds  []result `json:"rounds"`
	}
	var doc result
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rounds) != 2 || doc.Ratio == nil || doc.Rounds[0].Ratio == nil || doc.Rounds[1].Ratio == nil {
		t.Fatalf("want a median and 2 rounds with their ratios: %s", b)
	}
	r0, r1 := *doc.Rounds[0].Ratio, *doc.Rounds[1].Ratio
	if want := (r0 + r1) / 2; math.Abs(*doc.Ratio-want) > 1e-9 {
		t.Errorf("spawn_p50_ratio_inproc = %v, want the median of %v and %v", *doc.Ratio, r0, r1)
	}
	if len(doc.Targets) != 2 || doc.Targets[0].Value != *doc.Ratio || len(doc.Targets[0].RoundValues) != 2 ||
		doc.Targets[0].RoundValues[0] != r0 || len(doc.Rounds[0].Targets) != 2 || len(doc.Rounds[0].Rounds) != 0 {
		t.Errorf("targets %+v; round 1 %+v", doc.Targets, doc.Rounds[0])
	}
}
