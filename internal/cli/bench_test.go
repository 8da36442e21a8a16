package cli_test

import (
	"encoding/json"
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
