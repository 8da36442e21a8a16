package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestAgentArgsRefuseBadCalls(t *testing.T) {
	for _, args := range []string{
		`{"name":"two words","task":"x"}`,
		`{"name":"","task":"x"}`,
		`{"name":"` + strings.Repeat("a", 65) + `","task":"x"}`,
		`{"name":"ok","task":"   "}`,
		`{"name":"ok"}`,
		`not json`,
		`{"name":"ok","task":"x","extra":1}`,
		`{"name":"ok","task":"x"} trailing`,
		`{"name":"ok","task":"x"} {"task":"y"}`,
		`[{"name":"ok","task":"x"}]`,
	} {
		if a, err := ParseAgentArgs(json.RawMessage(args)); err == nil || !errors.Is(err, ErrBadArgs) {
			t.Errorf("%s: got (%+v, %v), want bad-args error", args, a, err)
		}
	}
	for _, args := range []string{
		`{"name":"research.v2","task":"find it"}`,
		`{"NAME":"research.v2","Task":"find it"}`,                // names in any case
		`{"name":"first","name":"research.v2","task":"find it"}`, // the last of a repeated name
		" \n{\"name\":\"research.v2\",\"task\":\"find it\"}\n ",  // white space around
	} {
		if a, err := ParseAgentArgs(json.RawMessage(args)); err != nil || a.Name != "research.v2" || a.Task != "find it" {
			t.Errorf("good call %s: (%+v, %v)", args, a, err)
		}
	}
}

// BenchmarkParseAgentArgs is every helper's first step on its parent's
// worker.
func BenchmarkParseAgentArgs(b *testing.B) {
	raw := json.RawMessage(`{"name":"part-17","task":"- part 17\nDo the thing for part 17 of the list"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAgentArgs(raw); err != nil {
			b.Fatal(err)
		}
	}
}
