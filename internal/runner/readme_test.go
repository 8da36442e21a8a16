package runner

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadmeShowsTheAgentSchema: the documentation's page on the agent tool
// (docs/agent-tool.md) shows the schema and description the model really
// gets.
func TestReadmeShowsTheAgentSchema(t *testing.T) {
	data, err := os.ReadFile("../../docs/agent-tool.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "# The agent tool\n")
	if !ok {
		t.Fatal(`docs/agent-tool.md has no "The agent tool" heading`)
	}
	_, block, _ := strings.Cut(section, "```json\n")
	block, _, _ = strings.Cut(block, "```")
	var shown struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(block), &shown); err != nil {
		t.Fatalf("docs/agent-tool.md's agent tool block is not JSON: %v\n%s", err, block)
	}
	a := agentTool{}
	var want, got any
	json.Unmarshal(a.Schema(), &want)
	json.Unmarshal(shown.Parameters, &got)
	if shown.Name != a.Name() || shown.Description != a.Description() {
		t.Errorf("docs/agent-tool.md shows %q / %q, the tool is %q / %q", shown.Name, shown.Description, a.Name(), a.Description())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/agent-tool.md's schema (-tool +docs):\n%s", diff)
	}
}
