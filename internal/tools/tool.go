package tools

import (
	"context"
	"encoding/json"

	"github.com/formica-run/formica/internal/model"
)

// Tool is a capability the model can call.
//
// Run returns the text handed back to the model. A returned error is also shown
// to the model (as "Error: ..."), and the loop goes on: a tool failing is
// information, not a reason to stop the agent. Run must honour ctx.
type Tool interface {
	Name() string
	Description() string
	// Schema is the JSON Schema of the arguments object.
	Schema() json.RawMessage
	Run(ctx context.Context, args json.RawMessage) (string, error)
}

// Subjecter is implemented by tools whose calls permission rules can match on
// an argument: the command for bash, the path for file tools.
type Subjecter interface {
	Subject(args json.RawMessage) string
}

// Schemas describes a list of tools to a model, in order.
func Schemas(ts []Tool) []model.ToolSchema {
	out := make([]model.ToolSchema, len(ts))
	for i, t := range ts {
		out[i] = model.ToolSchema{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()}
	}
	return out
}

// Func adapts a function to a Tool.
type Func struct {
	ToolName   string
	Desc       string
	Parameters json.RawMessage
	Fn         func(ctx context.Context, args json.RawMessage) (string, error)
}

func (f *Func) Name() string            { return f.ToolName }
func (f *Func) Description() string     { return f.Desc }
func (f *Func) Schema() json.RawMessage { return f.Parameters }
func (f *Func) Run(ctx context.Context, args json.RawMessage) (string, error) {
	return f.Fn(ctx, args)
}
