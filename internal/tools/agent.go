package tools

import (
	"encoding/json"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/formica-run/formica/internal/spec"
)

// AgentToolName is the name the model calls to spawn a helper. The runner's
// loop acts on such a call itself, as on a handoff.
const AgentToolName = "agent"

// AgentArgs are the arguments the model passes to the agent tool.
type AgentArgs struct {
	Name string `json:"name"`
	Task string `json:"task"`
}

// agentArgsOptions read the agent tool's arguments as encoding/json does
// (names in any case, the last of a repeated one, invalid UTF-8 replaced),
// refusing members other than name and task and anything after the object.
// The v2 decoder does it in two allocations, the task and the name, where
// a json.Decoder took eleven and a kilobyte: every helper's call goes
// through here, thousands at once in a fan-out.
var agentArgsOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.RejectUnknownMembers(true))

// ParseAgentArgs decodes and checks the agent tool's arguments.
func ParseAgentArgs(raw json.RawMessage) (AgentArgs, error) {
	var a AgentArgs
	if err := jsonv2.Unmarshal(raw, &a, agentArgsOptions); err != nil {
		return a, fmt.Errorf("%w: agent arguments are not a JSON object with name and task: %v", ErrBadArgs, err)
	}
	return a, CheckHelperArgs(a.Name, a.Task)
}

// CheckHelperArgs applies the agent tool's rules for a helper's name (a
// spec name) and task; the coordinator applies them again to what a worker
// sends, before thread.SetHelper.
func CheckHelperArgs(name, task string) error {
	if !spec.ValidName(name) {
		return fmt.Errorf("%w: name %q must be one word of 1-64 letters, digits, '-', '_' or '.'", ErrBadArgs, name)
	}
	if strings.TrimSpace(task) == "" {
		return fmt.Errorf("%w: task must not be empty", ErrBadArgs)
	}
	return nil
}
