package api

import (
	"runtime"
	"strings"
	"testing"
)

// TestDeepBodiesAreRefused sends bodies nested past maxDepth: a 400 before
// decoding, however the nesting is spelled; brackets inside strings do not
// count.
func TestDeepBodiesAreRefused(t *testing.T) {
	h := newHarness(t, Config{})
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for name, body := range map[string]string{
		"a million brackets": strings.Repeat("[", 1<<20-16),
		"in model args":      `{"task": "x", "agent": {"name": "a", "model_args": {"k": ` + deep(100) + `}}}`,
		"objects":            `{"task": "x", "agent": ` + strings.Repeat(`{"a": `, 100) + "1" + strings.Repeat("}", 100) + `}`,
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		status, code, msg := errorOf(t, h.do("POST", "/v1/runs", body))
		runtime.ReadMemStats(&after)
		if status != 400 || code != "bad_request" || !strings.Contains(msg, "deeper than 64") {
			t.Errorf("%s: %d %s %q", name, status, code, msg)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%s: refusing a %d-byte body allocated %d MiB", name, len(body), grew>>20)
		}
	}
	ok := `{"task": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"", "agent": {"name": "a", "model_args": {"k": ` + deep(40) + `}}}`
	if r := h.do("POST", "/v1/runs", ok); r.status != 202 {
		t.Errorf("a body nested 43 deep with brackets in a string: %d %s", r.status, r.body)
	}
}
