package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

const fullYAML = `name: lead
instructions: |
  Plan, then delegate.
model: openai:gpt-4o
model_args: {temperature: 0.2, max_tokens: 1000}
tools: [agent, search]
parallel_tool_calls: false
max_turns: 12
output_schema:
  type: object
  required: [summary]
  properties:
    summary: {type: string}
handoffs: [reviewer]
harness:
  cwd: /srv/work
  tools: [read_file, bash]
  permissions:
    default: ask
    rules:
      - {tool: read_file, decision: allow}
      - tool: bash
        match: "git *"
        decision: allow
helper:
  instructions: Do the sub-task.
  model: anthropic:claude-sonnet-4-5
  model_args: {temperature: 0}
  output_schema: {type: string}
  tools:
    policy: restrict
    only: [search]
    add: [fetch]
agents:
  - name: reviewer
    instructions: Review.
    harness:
      tools: []
`

func fullWant() *File {
	no := false
	return &File{
		Agent: Agent{
			Name:              "lead",
			Instructions:      "Plan, then delegate.\n",
			Model:             "openai:gpt-4o",
			ModelArgs:         model.Args{"temperature": 0.2, "max_tokens": 1000},
			Tools:             []string{"agent", "search"},
			ParallelToolCalls: &no,
			MaxTurns:          12,
			OutputSchema:      json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
			Handoffs:          []string{"reviewer"},
			Harness: Harness{
				Cwd:   "/srv/work",
				Tools: []string{"read_file", "bash"},
				Permissions: policy.Permission{
					Default: policy.Ask,
					Rules: []policy.Rule{
						{Tool: "read_file", Decision: policy.Allow},
						{Tool: "bash", Match: "git *", Decision: policy.Allow},
					},
				},
			},
			Helper: Helper{
				Instructions: "Do the sub-task.",
				Model:        "anthropic:claude-sonnet-4-5",
				ModelArgs:    model.Args{"temperature": 0},
				OutputSchema: json.RawMessage(`{"type":"string"}`),
				Tools:        ToolPolicy{Policy: policy.Restrict, Only: []string{"search"}, Add: []string{"fetch"}},
			},
		},
		Agents: []Agent{{Name: "reviewer", Instructions: "Review.", Harness: Harness{Tools: []string{}}}},
	}
}

func TestParseValid(t *testing.T) {
	jsonWant := fullWant()
	jsonWant.ModelArgs = model.Args{"temperature": 0.2, "max_tokens": 1000}
	tests := []struct {
		name, file, data string
		want             *File
	}{
		{"full yaml", "agent.yaml", fullYAML, fullWant()},
		{"minimal", "a.yaml", "name: solo\n", &File{Agent: Agent{Name: "solo"}}},
		{"json", "agent.json", `{
	"name": "lead", "instructions": "Plan, then delegate.\n", "model": "openai:gpt-4o",
	"model_args": {"temperature": 0.2, "max_tokens": 1000},
	"tools": ["agent", "search"], "parallel_tool_calls": false, "max_turns": 12,
	"output_schema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
	"handoffs": ["reviewer"],
	"harness": {"cwd": "/srv/work", "tools": ["read_file", "bash"], "permissions": {"default": "ask", "rules": [
		{"tool": "read_file", "decision": "allow"}, {"tool": "bash", "match": "git *", "decision": "allow"}]}},
	"helper": {"instructions": "Do the sub-task.", "model": "anthropic:claude-sonnet-4-5", "model_args": {"temperature": 0},
		"output_schema": {"type": "string"}, "tools": {"policy": "restrict", "only": ["search"], "add": ["fetch"]}},
	"agents": [{"name": "reviewer", "instructions": "Review.", "harness": {"tools": []}}]
}`, jsonWant},
		{"schema as JSON string", "a.yaml", "name: a\noutput_schema: '{\"type\": \"integer\"}'\n",
			&File{Agent: Agent{Name: "a", OutputSchema: json.RawMessage(`{"type": "integer"}`)}}},
		{"anchors and merge keys", "a.yaml", `name: a
harness: &h
  cwd: /x
helper:
  output_schema: &s {type: object, properties: {n: {type: integer}}}
agents:
  - name: b
    harness: *h
    output_schema:
      <<: *s
      required: [n]
`, &File{
			Agent: Agent{Name: "a", Harness: Harness{Cwd: "/x"},
				Helper: Helper{OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}},
			Agents: []Agent{{Name: "b", Harness: Harness{Cwd: "/x"},
				OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.data), tt.file)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseUnknownKeys(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"root", "name: a\nharnes: {}\n", `agent.yaml:2: unknown key "harnes"`},
		{"harness", "name: a\nharness:\n  cwd: .\n  permisions: {}\n", `agent.yaml:4: unknown key "permisions"`},
		{"permissions", "name: a\nharness:\n  permissions:\n    defualt: ask\n", `agent.yaml:4: unknown key "defualt"`},
		{"rules", "name: a\nharness:\n  permissions:\n    rules:\n      - tool: bash\n        decison: ask\n", `agent.yaml:6: unknown key "decison"`},
		{"helper", "name: a\nhelper:\n  instruction: x\n", `agent.yaml:3: unknown key "instruction"`},
		{"helper.tools", "name: a\nhelper:\n  tools:\n    policy: restrict\n    onyl: [x]\n", `agent.yaml:5: unknown key "onyl"`},
		{"agents[i]", "name: a\nagents:\n  - name: b\n  - name: c\n    handof: [a]\n", `agent.yaml:5: unknown key "handof"`},
		{"agents[i].helper", "name: a\nagents:\n  - name: b\n    helper: {modle: sim}\n", `agent.yaml:4: unknown key "modle"`},
		{"json", "{\n  \"name\": \"a\",\n  \"helper\": {\"tools\": {\"polcy\": \"inherit\"}}\n}", `agent.yaml:3: unknown key "polcy"`},
		{"merged in", "name: a\nharness:\n  <<: {cwd: ., wat: 1}\n", `agent.yaml:3: unknown key "wat"`},
		{"several", "name: a\nfoo: 1\nharness: {bar: 2}\n", `agent.yaml:2: unknown key "foo"` + "\n" + `agent.yaml:3: unknown key "bar"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), "agent.yaml")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestParseSyntaxAndTypes(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"empty", "", "a.yaml: empty spec"},
		{"null", "~\n", "a.yaml: empty spec"},
		{"not a mapping", "- a\n", "a.yaml:1: a spec must be a mapping of keys to values"},
		{"two documents", "name: a\n---\nname: b\n", "a.yaml:2: more than one YAML document"},
		{"syntax", "name: [a\n", "a.yaml:1: did not find expected ',' or ']'"},
		{"type", "name: a\nmax_turns: lots\n", "a.yaml:2: cannot unmarshal !!str `lots` into int"},
		{"duplicate key", "name: a\nname: b\n", `a.yaml:2: mapping key "name" already defined at line 1`},
		{"schema not json", "name: a\noutput_schema: nope\n", "a.yaml:2: output_schema: want a mapping or JSON text"},
		{"schema infinity", "name: a\noutput_schema: {maximum: .inf}\n", "a.yaml:2: output_schema: line 2: .inf is not a JSON number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data), "a.yaml")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(p, []byte("name: a\nmax_turns: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if want := p + ": max_turns: -1 is negative"; err == nil || err.Error() != want {
		t.Errorf("Load error = %v, want %q", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "max_turns" {
		t.Errorf("errors.As FieldError = %+v", fe)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want not-exist and not ErrInvalid", err)
	}
	if !strings.HasPrefix(fullYAML, "name:") {
		t.Fatal("fixture changed")
	}
}

// FuzzParse feeds arbitrary documents to the spec parser, which the HTTP API
// runs on request bodies: it must return a spec or an error, never panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: a\ninstructions: x\nhelper: {tools: {policy: restrict, only: [agent]}}\n"))
	f.Add([]byte(`{"name":"a","output_schema":{"type":"object"},"agents":[{"name":"b"}],"handoffs":["b"]}`))
	f.Add([]byte("name: a\nharness: {permissions: {default: ask, rules: [{tool: bash, match: 'git *', decision: allow}]}}\n"))
	f.Add([]byte("&x name: *x\n"))
	f.Add([]byte(aliasBomb(3)))
	f.Add([]byte("name: x\nmodel_args: {a: " + strings.Repeat("[", 80) + strings.Repeat("]", 80) + "}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz.yaml")
		if err == nil && file.Name == "" {
			t.Fatal("a spec without a name was accepted")
		}
	})
}

func TestParseBudget(t *testing.T) {
	f, err := Parse([]byte("name: a\nbudget: {tokens: 100, duration: 10m, spawns: 3}\nhelper:\n  budget: {output_tokens: 7}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Budget.Tokens != 100 || f.Budget.Duration != 10*time.Minute || f.Budget.Spawns != 3 || f.Helper.Budget.OutputTokens != 7 {
		t.Fatalf("budget = %+v, helper %+v", f.Budget, f.Helper.Budget)
	}
	if _, err := Parse([]byte("name: a\nbudget: {tokens: -1, cost: 3}\n"), "a.yaml"); err == nil || !strings.Contains(err.Error(), `a.yaml:2: unknown key "cost"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse([]byte("name: a\nbudget: {tokens: -1}\n"), "a.yaml"); err == nil || !strings.Contains(err.Error(), "budget: amounts must not be negative") {
		t.Fatalf("got %v", err)
	}
}
