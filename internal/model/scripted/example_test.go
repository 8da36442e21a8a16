package scripted_test

import (
	"context"
	"fmt"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/scripted"
)

func Example() {
	m, err := scripted.Parse([]byte(`
responses:
  - tool_calls: [{name: agent, arguments: {name: a, task: do a}}]
  - text: all done
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	conv := []model.Message{{Role: model.RoleUser, Content: "go"}}
	resp, _ := m.Generate(context.Background(), model.Request{Messages: conv})
	fmt.Println(resp.ToolCalls[0].ID, resp.ToolCalls[0].Arguments)

	conv = append(conv, model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "a done"})
	resp, _ = m.Generate(context.Background(), model.Request{Messages: conv})
	fmt.Println(resp.Text)
	// Output:
	// call_0_1 {"name":"a","task":"do a"}
	// all done
}
