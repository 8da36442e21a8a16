package model

import "testing"

func TestWindow(t *testing.T) {
	for ref, want := range map[string]int64{
		"openai:gpt-4o":                 128_000,
		"openai:gpt-4o-mini-2024-07-18": 128_000,
		"openai:gpt-4":                  8_192,
		"openai:gpt-4-32k":              32_768,
		"openai:gpt-4.1-mini":           1_047_576,
		"anthropic:claude-sonnet-4-5":   200_000,
		"fast/meta-llama/Llama-3.1-8B":  128_000,
		"openai:some-local-model":       DefaultWindow,
		"router/unknown":                DefaultWindow,
		"sim":                           0,
		"scripted:/tmp/script.json":     0,
		"openai:o1-mini":                128_000,
		"openai:o1-preview":             200_000,
	} {
		r, err := ParseRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := Window(r); got != want {
			t.Errorf("Window(%s) = %d, want %d", ref, got, want)
		}
	}
}
