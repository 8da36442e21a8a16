package sim_test

import (
	"context"
	"fmt"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/sim"
)

func Example() {
	m := sim.New()
	req := model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Content: "Ship it:\n- write docs\n- run tests\n  - unit\n  - race"}},
		Tools:    []model.ToolSchema{{Name: "agent"}},
	}
	resp, _ := m.Generate(context.Background(), req)
	for _, c := range resp.ToolCalls {
		fmt.Println(c.ID, c.Arguments)
	}

	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, ToolCallID: "call_1", Content: "done: write docs"},
		model.Message{Role: model.RoleTool, ToolCallID: "call_2", Content: "unit: done: unit\nrace: done: race"},
	)
	resp, _ = m.Generate(context.Background(), req)
	fmt.Println(resp.Text)
	// Output:
	// call_1 {"name":"write-docs","task":"write docs"}
	// call_2 {"name":"run-tests","task":"run tests\n- unit\n- race"}
	// write-docs: done: write docs
	// run-tests: unit: done: unit
	//   race: done: race
}
