package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
)

func Example() {
	// A stand-in for api.anthropic.com; in real use leave BaseURL empty.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"text","text":"Two scouts, then."},
				{"type":"tool_use","id":"toolu_1","name":"agent","input":{"task":"north"}},
				{"type":"tool_use","id":"toolu_2","name":"agent","input":{"task":"south"}}],
			"stop_reason":"tool_use","stop_sequence":null,
			"usage":{"input_tokens":120,"output_tokens":40}}`)
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
	// Output:
	// Two scouts, then.
	// toolu_1 agent {"task":"north"}
	// toolu_2 agent {"task":"south"}
}
