package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tracing"
)

// AgentToolName is the name the model calls to spawn a helper.
const AgentToolName = "agent"

// Spawner starts a helper for the calling thread and blocks until it ends.
// The runner puts one in the context of every tool call (WithSpawner), so the
// agent tool itself is stateless and helpers can inherit it.
//
// A refused spawn returns a *limits.Refusal error; a helper that ran and failed
// returns a HelperResult with Failed set.
type Spawner interface {
	Spawn(ctx context.Context, name, task string) (HelperResult, error)
}

// HelperResult is how a helper ended.
type HelperResult struct {
	Output string
	// Failed is set when the helper did not succeed; Reason says why.
	Failed bool
	Reason string
}

type spawnerKey struct{}

// WithSpawner returns ctx carrying s for the agent tool.
func WithSpawner(ctx context.Context, s Spawner) context.Context {
	return context.WithValue(ctx, spawnerKey{}, s)
}

// SpawnerFrom returns the spawner ctx carries, or nil.
func SpawnerFrom(ctx context.Context) Spawner {
	s, _ := ctx.Value(spawnerKey{}).(Spawner)
	return s
}

// AgentArgs are the arguments the model passes to the agent tool.
type AgentArgs struct {
	Name string `json:"name"`
	Task string `json:"task"`
}

// ParseAgentArgs decodes and checks the agent tool's arguments.
func ParseAgentArgs(raw json.RawMessage) (AgentArgs, error) {
	var a AgentArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("%w: agent arguments are not a JSON object with name and task: %v", ErrBadArgs, err)
	}
	if dec.More() {
		return a, fmt.Errorf("%w: agent arguments have trailing data", ErrBadArgs)
	}
	return a, CheckHelperArgs(a.Name, a.Task)
}

// CheckHelperArgs applies the agent tool's rules for a helper's name (a
// spec name) and task; the coordinator applies them again to what a worker
// sends, before thread.Helper.
func CheckHelperArgs(name, task string) error {
	if !spec.ValidName(name) {
		return fmt.Errorf("%w: name %q must be one word of 1-64 letters, digits, '-', '_' or '.'", ErrBadArgs, name)
	}
	if strings.TrimSpace(task) == "" {
		return fmt.Errorf("%w: task must not be empty", ErrBadArgs)
	}
	return nil
}

type callIDKey struct{}

// WithCallID returns ctx carrying the id of the tool call being run.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallIDFrom returns the id of the tool call ctx runs, or "".
func CallIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// FailedText is the tool result of a helper that did not succeed.
func FailedText(name, reason string) string {
	return "Helper " + name + " failed: " + reason
}

var agentSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"name":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,64}$","description":"One word naming the helper, for logs and the dashboard."},` +
	`"task":{"type":"string","minLength":1,"description":"The complete instruction. The helper sees only this, not your conversation."}},` +
	`"required":["name","task"],"additionalProperties":false}`)

type agentTool struct{}

// Agent returns the `agent` tool. It asks no permission (DESIGN rule 1).
func Agent() Tool { return agentTool{} }

func (agentTool) Name() string { return AgentToolName }

func (agentTool) Description() string {
	return "Delegate a self-contained task to a fresh helper agent and wait for its final answer. " +
		"The helper sees only the task you give it. Call it several times in one turn to run helpers in parallel."
}

func (agentTool) Schema() json.RawMessage { return agentSchema }

// Run spawns the helper and returns its answer. Refusals and helper failures
// are ordinary results, so the parent's model can carry on by itself.
func (agentTool) Run(ctx context.Context, raw json.RawMessage) (string, error) {
	args, err := ParseAgentArgs(raw)
	if err != nil {
		return "", err
	}
	sp := SpawnerFrom(ctx)
	if sp == nil {
		return "", ErrNoSpawner
	}
	res, err := sp.Spawn(ctx, args.Name, args.Task)
	var refusal *limits.Refusal
	switch {
	case errors.As(err, &refusal):
		tracing.AddEvent(ctx, tracing.EventSpawnRefused, attribute.String("reason", string(refusal.Reason)))
		return refusal.Error(), nil
	case err != nil:
		return FailedText(args.Name, err.Error()), nil
	case res.Failed:
		return FailedText(args.Name, res.Reason), nil
	}
	return res.Output, nil
}
