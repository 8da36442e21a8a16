package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/openai"
)

func Example() {
	// A stand-in for a local server such as Ollama, streaming its answer
	// as server-sent events; with OpenAI itself, leave BaseURL empty and
	// set APIKey.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"llama3.2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"sugar\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"llama3.2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"llama3.2","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":12,"total_tokens":43}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
		}
	}))
	defer srv.Close()

	m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "llama3.2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Content: "Where is the sugar?"}},
		Tools:    []model.ToolSchema{{Name: "search", Description: "Search the field."}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tc := range resp.ToolCalls {
		fmt.Println(tc.ID, tc.Name, tc.Arguments)
	}
	fmt.Println(resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// call_1 search {"q":"sugar"}
	// tool_calls 31 12
}
