package model

import "strings"

// DefaultWindow is the context window, in tokens, of a model the table
// below does not know: 128k, what most current models offer at least. A
// model with a smaller window needs context_window in its agent spec.
const DefaultWindow = 128_000

// windows are the context windows of well-known models, by the start of
// the provider's model name; the longest matching start wins, so dated
// and suffixed names ("gpt-4o-2024-08-06", "claude-sonnet-4-5") find
// their family.
var windows = map[string]int64{
	"gpt-3.5-turbo": 16_385,
	"gpt-4":         8_192,
	"gpt-4-32k":     32_768,
	"gpt-4-turbo":   128_000,
	"gpt-4o":        128_000,
	"gpt-4.1":       1_047_576,
	"gpt-5":         400_000,
	"o1":            200_000,
	"o1-mini":       128_000,
	"o3":            200_000,
	"o4-mini":       200_000,
	"claude-":       200_000,
	"gemini-1.5":    1_048_576,
	"gemini-2":      1_048_576,
	"llama-3.1":     128_000,
	"llama-3.3":     128_000,
	"mistral-large": 128_000,
	"deepseek-chat": 64_000,
	"qwen2.5":       32_768,
}

// Window returns the context window in tokens of the model ref names: 0
// (no limit) for the sim and scripted providers, which keep no context;
// for any other provider or endpoint the table's entry for its model name
// (the part after a vendor prefix such as "meta-llama/" too), else
// DefaultWindow.
func Window(ref Ref) int64 {
	if !ref.Endpoint && (ref.Provider == "sim" || ref.Provider == "scripted") {
		return 0
	}
	name := strings.ToLower(ref.Name)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, window := "", int64(DefaultWindow)
	for prefix, w := range windows {
		if strings.HasPrefix(name, prefix) && len(prefix) > len(best) {
			best, window = prefix, w
		}
	}
	return window
}
