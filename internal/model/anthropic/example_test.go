package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
)

func Example() {
	// A stand-in for api.anthropic.com, which streams its answer as
	// server-sent events; in real use leave BaseURL empty.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`message_start`, `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":120,"output_tokens":1}}}`,
			`content_block_start`, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Two scouts, "}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"then."}}`,
			`content_block_stop`, `{"type":"content_block_stop","index":0}`,
			`content_block_start`, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"agent","input":{}}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"task\": \"north\"}"}}`,
			`content_block_stop`, `{"type":"content_block_stop","index":1}`,
			`content_block_start`, `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"agent","input":{}}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"task\": \"south\"}"}}`,
			`content_block_stop`, `{"type":"content_block_stop","index":2}`,
			`message_delta`, `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}`,
			`message_stop`, `{"type":"message_stop"}`,
		} {
			if strings.HasPrefix(ev, "{") {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			} else {
				fmt.Fprintf(w, "event: %s\n", ev)
			}
		}
	}))
	defer srv.Close()

	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-example", Model: "claude-sonnet-4-5"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), model.Request{
		Messages:          []model.Message{{Role: model.RoleUser, Content: "Search both sides of the nest."}},
		Tools:             []model.ToolSchema{{Name: "agent", Description: "Start a helper."}},
		ParallelToolCalls: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text)
	for _, tc := range resp.ToolCalls {
		fmt.Println(tc.ID, tc.Name, tc.Arguments)
	}
	fmt.Println(resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// Two scouts, then.
	// toolu_1 agent {"task": "north"}
	// toolu_2 agent {"task": "south"}
	// tool_use 120 40
}
