package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/limits"
)

type fakeSpawner struct {
	calls  int
	result HelperResult
	err    error
}

func (f *fakeSpawner) Spawn(_ context.Context, name, task string) (HelperResult, error) {
	f.calls++
	return f.result, f.err
}

func TestAgentToolBadCallsSpawnNothing(t *testing.T) {
	for _, args := range []string{
		`{"name":"two words","task":"x"}`,
		`{"name":"","task":"x"}`,
		`{"name":"` + strings.Repeat("a", 65) + `","task":"x"}`,
		`{"name":"ok","task":"   "}`,
		`{"name":"ok"}`,
		`not json`,
		`{"name":"ok","task":"x","extra":1}`,
		`{"name":"ok","task":"x"} trailing`,
	} {
		sp := &fakeSpawner{}
		out, err := Agent().Run(WithSpawner(context.Background(), sp), json.RawMessage(args))
		if err == nil || !errors.Is(err, ErrBadArgs) {
			t.Errorf("%s: got (%q, %v), want bad-args error", args, out, err)
		}
		if sp.calls != 0 {
			t.Errorf("%s: spawned", args)
		}
	}
}

func TestAgentToolResults(t *testing.T) {
	ok := json.RawMessage(`{"name":"research.v2","task":"find it"}`)
	tests := []struct {
		name string
		sp   *fakeSpawner
		want string
	}{
		{"answer", &fakeSpawner{result: HelperResult{Output: "42"}}, "42"},
		{"depth", &fakeSpawner{err: &limits.Refusal{Reason: limits.ReasonDepth}}, limits.DepthMessage},
		{"threads", &fakeSpawner{err: &limits.Refusal{Reason: limits.ReasonThreads}}, limits.ThreadMessage},
		{"failed", &fakeSpawner{result: HelperResult{Failed: true, Reason: "max turns reached (3)"}}, "Helper research.v2 failed: max turns reached (3)"},
		{"transport", &fakeSpawner{err: errors.New("worker lost")}, "Helper research.v2 failed: worker lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Agent().Run(WithSpawner(context.Background(), tt.sp), ok)
			if err != nil || got != tt.want {
				t.Fatalf("got (%q, %v), want %q", got, err, tt.want)
			}
		})
	}
	if _, err := Agent().Run(context.Background(), ok); !errors.Is(err, ErrNoSpawner) {
		t.Errorf("no spawner: %v", err)
	}
}
