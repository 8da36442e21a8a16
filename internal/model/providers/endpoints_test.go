package providers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/quotaserver"
	"github.com/formica-run/formica/internal/quota"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseEndpoints(t *testing.T) {
	file := `
endpoints:
  fast:
    format: openai
    base_url: http://127.0.0.1:8000/v1
    key_env: FAST_KEY
    requests_per_minute: 600
    burst: 10
    in_flight: 16
    idle_timeout: 90s
  claude:
    format: anthropic
    base_url: http://127.0.0.1:9000
    input_tokens_per_minute: 40000
    output_tokens_per_minute: 8000
`
	eps, err := Parse([]byte(file), env(map[string]string{"FAST_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := eps.Endpoint("fast")
	if !ok || fast.Format != FormatOpenAI || fast.KeyEnv != "FAST_KEY" || fast.IdleTimeout.Seconds() != 90 ||
		fast.Limits != (quota.Limits{RequestsPerMinute: 600, Burst: 10, InFlight: 16}) {
		t.Errorf("fast = %+v, %v", fast, ok)
	}
	if c, _ := eps.Endpoint("claude"); c.Limits.InputTokensPerMinute != 40000 || c.Format != FormatAnthropic {
		t.Errorf("claude = %+v", c)
	}
	if got, want := strings.Join(eps.Names(), ","), "anthropic,claude,fast,openai"; got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	o := &Opener{Endpoints: eps}
	for _, ref := range []string{"fast/gpt-4o", "claude/claude-sonnet-4-5", "sim"} {
		if _, err := o.Open(ref); err != nil {
			t.Errorf("open %s: %v", ref, err)
		}
	}
	if err := o.Check("slow/gpt-4o"); !errors.Is(err, ErrUnknownEndpoint) || !strings.Contains(err.Error(), "claude, fast") {
		t.Errorf("unknown endpoint: %v", err)
	}
}

func TestParseEndpointsRefusesAtStart(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"format":      {"endpoints:\n  a: {format: grpc, base_url: http://x}\n", `format "grpc"`},
		"no url":      {"endpoints:\n  a: {format: openai}\n", "base_url is missing"},
		"bad url":     {"endpoints:\n  a: {format: openai, base_url: 'ftp://x'}\n", "not an http(s) URL"},
		"bad name":    {"endpoints:\n  a.b: {format: openai, base_url: http://x}\n", "one word"},
		"slash name":  {"endpoints:\n  a/b: {format: openai, base_url: http://x}\n", "one word"},
		"negative":    {"endpoints:\n  a: {format: openai, base_url: http://x, requests_per_minute: -1}\n", "negative"},
		"missing key": {"endpoints:\n  a: {format: openai, base_url: http://x, key_env: NOPE}\n", "NOPE is not set"},
		"unknown key": {"endpoints:\n  a: {format: openai, base_url: http://x, rpm: 3}\n", "rpm"},
		"not yaml":    {"endpoints: [", "providers file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want it to mention %q", err, tc.want)
			}
			if !errors.Is(err, ErrProvidersFile) {
				t.Errorf("err %v does not wrap ErrProvidersFile", err)
			}
		})
	}
}

func TestParseRefForms(t *testing.T) {
	for ref, want := range map[string]model.Ref{
		"openai:gpt-4o":                {Provider: "openai", Name: "gpt-4o"},
		"fast/gpt-4o":                  {Provider: "fast", Name: "gpt-4o", Endpoint: true},
		"openai:meta-llama/llama-3":    {Provider: "openai", Name: "meta-llama/llama-3"},
		"router/meta-llama/llama-3:8b": {Provider: "router", Name: "meta-llama/llama-3:8b", Endpoint: true},
		"sim":                          {Provider: "sim"},
	} {
		got, err := model.ParseRef(ref)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", ref, got, err, want)
		}
		if got.String() != ref {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), ref)
		}
	}
	for _, bad := range []string{"/gpt-4o", "fast/", ""} {
		if _, err := model.ParseRef(bad); !errors.Is(err, model.ErrBadRef) {
			t.Errorf("ParseRef(%q): %v, want ErrBadRef", bad, err)
		}
	}
}

// TestNamedEndpointCalls calls two OpenAI-compatible servers in one
// process through their endpoint names.
func TestNamedEndpointCalls(t *testing.T) {
	a, err := quotaserver.Start(quotaserver.Config{Format: quotaserver.OpenAI})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := quotaserver.Start(quotaserver.Config{Format: quotaserver.Anthropic})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	file := "endpoints:\n  a: {format: openai, base_url: " + a.BaseURL() + "}\n  b: {format: anthropic, base_url: " + b.BaseURL() + "}\n"
	eps, err := Parse([]byte(file), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	o := &Opener{Endpoints: eps}
	for _, ref := range []string{"a/m", "b/m"} {
		m, err := o.Open(ref)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := m.Generate(context.Background(), model.Request{Model: "m",
			Messages: []model.Message{{Role: model.RoleUser, Content: "hello"}}})
		if err != nil || resp.Text != "done: hello" {
			t.Errorf("%s: %q, %v", ref, resp.Text, err)
		}
	}
	if a.Stats().Accepted != 1 || b.Stats().Accepted != 1 {
		t.Errorf("servers saw %+v and %+v, want one call each", a.Stats(), b.Stats())
	}
}
