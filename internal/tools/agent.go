package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

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

// ParseAgentArgs decodes and checks the agent tool's arguments: one JSON
// object with name and task (names in any case, the last of a repeated one
// kept), no other member, nothing after it.
func ParseAgentArgs(raw json.RawMessage) (AgentArgs, error) {
	var a AgentArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&a)
	if err == nil {
		if _, end := dec.Token(); end != io.EOF {
			err = errors.New("data after the object")
		}
	}
	if err != nil {
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
