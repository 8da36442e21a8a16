package spec

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/policy"
)

func TestHelperSpec(t *testing.T) {
	off := false
	harness := Harness{Cwd: "/w", Tools: []string{"read_file"}, Permissions: policy.Permission{
		Default: policy.Deny, Rules: []policy.Rule{{Tool: "read_file", Decision: policy.Allow}}}}
	parent := func(h Helper) Agent {
		return Agent{
			Name: "lead", Instructions: "lead prompt", Model: "openai:gpt-4o",
			ModelArgs: model.Args{"temperature": 0.7, "max_tokens": 500},
			Tools:     []string{"agent", "search", "fetch"}, ParallelToolCalls: &off, MaxTurns: 9,
			OutputSchema: json.RawMessage(`{"type":"object"}`), Handoffs: []string{"other"},
			Harness: harness, Helper: h,
		}
	}
	child := func(h Helper, model string, args model.Args, tools ...string) Agent {
		instr := h.Instructions
		if instr == "" {
			instr = DefaultHelperInstructions
		}
		return Agent{
			Name: "kid", Instructions: instr, Model: model, ModelArgs: args, Tools: tools,
			ParallelToolCalls: &off, MaxTurns: 9, OutputSchema: h.OutputSchema, Harness: harness, Helper: h,
		}
	}
	tests := []struct {
		name   string
		helper Helper
		want   func(Helper) Agent
	}{
		{"zero template inherits all", Helper{}, func(h Helper) Agent {
			return child(h, "openai:gpt-4o", model.Args{"temperature": 0.7, "max_tokens": 500}, "agent", "search", "fetch")
		}},
		{"inherit adds new names after parent's", Helper{Tools: ToolPolicy{Policy: policy.Inherit, Add: []string{"calc", "search"}}},
			func(h Helper) Agent {
				return child(h, "openai:gpt-4o", model.Args{"temperature": 0.7, "max_tokens": 500}, "agent", "search", "fetch", "calc")
			}},
		{"override keeps only add", Helper{Tools: ToolPolicy{Policy: policy.Override, Add: []string{"calc", "calc"}}},
			func(h Helper) Agent {
				return child(h, "openai:gpt-4o", model.Args{"temperature": 0.7, "max_tokens": 500}, "calc")
			}},
		{"override without add has no tools", Helper{Tools: ToolPolicy{Policy: policy.Override}}, func(h Helper) Agent {
			return child(h, "openai:gpt-4o", model.Args{"temperature": 0.7, "max_tokens": 500})
		}},
		{"restrict keeps parent order", Helper{Tools: ToolPolicy{Policy: policy.Restrict, Only: []string{"fetch", "agent", "ghost"}, Add: []string{"calc"}}},
			func(h Helper) Agent {
				return child(h, "openai:gpt-4o", model.Args{"temperature": 0.7, "max_tokens": 500}, "agent", "fetch", "calc")
			}},
		{"inherited model, args merged", Helper{Instructions: "be brief", ModelArgs: model.Args{"temperature": 0.0, "top_p": 0.5}},
			func(h Helper) Agent {
				return child(h, "openai:gpt-4o", model.Args{"temperature": 0.0, "max_tokens": 500, "top_p": 0.5}, "agent", "search", "fetch")
			}},
		{"own model, own args only", Helper{Model: "sim", ModelArgs: model.Args{"latency_ms": 5}, OutputSchema: json.RawMessage(`{"type":"string"}`)},
			func(h Helper) Agent {
				return child(h, "sim", model.Args{"latency_ms": 5}, "agent", "search", "fetch")
			}},
		{"own model, no args", Helper{Model: "anthropic:claude"}, func(h Helper) Agent {
			return child(h, "anthropic:claude", nil, "agent", "search", "fetch")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HelperSpec(parent(tt.helper), "kid")
			if diff := cmp.Diff(tt.want(tt.helper), got); diff != "" {
				t.Errorf("HelperSpec (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHelperSpecContextWindow: the template's window, else the parent's
// when the helper keeps the parent's model, else none (its model's default).
func TestHelperSpecContextWindow(t *testing.T) {
	for _, tc := range []struct {
		name           string
		parent, helper int64
		helperModel    string
		want           int64
	}{
		{"template's", 64000, 16000, "", 16000},
		{"template's with its own model", 64000, 16000, "sim", 16000},
		{"parent's with the parent's model", 64000, 0, "", 64000},
		{"model default with another model", 64000, 0, "openai:gpt-4o-mini", 0},
		{"none set", 0, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := Agent{Name: "lead", Model: "openai:gpt-4o", ContextWindow: tc.parent,
				Helper: Helper{Model: tc.helperModel, ContextWindow: tc.helper}}
			if got := HelperSpec(parent, "kid").ContextWindow; got != tc.want {
				t.Errorf("context window %d, want %d", got, tc.want)
			}
		})
	}
	f, err := Parse([]byte("name: a\ncontext_window: 32000\nhelper: {context_window: 8000}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.ContextWindow != 32000 || f.Helper.ContextWindow != 8000 {
		t.Errorf("parsed windows %d and %d, want 32000 and 8000", f.ContextWindow, f.Helper.ContextWindow)
	}
}

func TestHelperSpecSharesNothing(t *testing.T) {
	on := true
	p := Agent{
		Name: "p", ModelArgs: model.Args{"a": 1}, Tools: []string{"agent"}, ParallelToolCalls: &on,
		Harness: Harness{Tools: []string{"bash"}, Permissions: policy.Permission{Rules: []policy.Rule{{Tool: "bash", Decision: policy.Ask}}}},
		Helper:  Helper{OutputSchema: json.RawMessage(`{}`), Tools: ToolPolicy{Add: []string{"x"}}, ModelArgs: model.Args{"b": 2}},
	}
	h := HelperSpec(p, "h")
	h.ModelArgs["a"] = 9
	h.Tools[0] = "changed"
	*h.ParallelToolCalls = false
	h.Harness.Tools[0] = "changed"
	h.Harness.Permissions.Rules[0].Decision = policy.Allow
	h.Helper.OutputSchema[0] = '['
	h.Helper.Tools.Add[0] = "changed"
	h.Helper.ModelArgs["b"] = 9
	if p.ModelArgs["a"] != 1 || p.Tools[0] != "agent" || !*p.ParallelToolCalls || p.Harness.Tools[0] != "bash" ||
		p.Harness.Permissions.Rules[0].Decision != policy.Ask || string(p.Helper.OutputSchema) != "{}" ||
		p.Helper.Tools.Add[0] != "x" || p.Helper.ModelArgs["b"] != 2 {
		t.Errorf("changing the helper spec changed the parent: %+v", p)
	}
}

func TestHelperSpecRecursion(t *testing.T) {
	root := Default().Agent
	root.Model = "sim"
	kid := HelperSpec(root, "kid")
	grandkid := HelperSpec(kid, "grandkid")
	grandkid.Name = kid.Name
	if diff := cmp.Diff(kid, grandkid); diff != "" {
		t.Errorf("a helper's helper differs from the helper beyond its name (-kid +grandkid):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"agent"}, kid.Tools); diff != "" {
		t.Errorf("default helper tools (-want +got):\n%s", diff)
	}
}

func TestCatalog(t *testing.T) {
	f, err := Parse([]byte("name: a\nhandoffs: [b]\nagents: [{name: b, handoffs: [a]}, {name: c}]\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Agent{
		"a": {Name: "a", Handoffs: []string{"b"}},
		"b": {Name: "b", Handoffs: []string{"a"}},
		"c": {Name: "c"},
	}
	if diff := cmp.Diff(want, f.Catalog()); diff != "" {
		t.Errorf("Catalog (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	f := Default()
	if err := f.Validate(); err != nil {
		t.Fatalf("Default does not validate: %v", err)
	}
	if f.Name != "formica" || f.Model != "" || f.Instructions == "" {
		t.Errorf("Default = %+v", f.Agent)
	}
	if diff := cmp.Diff([]string{"agent"}, f.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	perms := f.Harness.Permissions
	for tool, want := range map[string]policy.Decision{
		"read_file": policy.Allow, "list_dir": policy.Allow, "glob": policy.Allow, "grep": policy.Allow,
		"write_file": policy.Ask, "edit_file": policy.Ask, "bash": policy.Ask, "fetch": policy.Ask,
	} {
		if got := perms.Decide(tool, ""); got != want {
			t.Errorf("Default decides %s for %s, want %s", got, tool, want)
		}
	}
	if v, _ := policy.ParseVisibility(string(f.Helper.Tools.Policy)); v != policy.Inherit {
		t.Errorf("helper policy %q, want inherit", f.Helper.Tools.Policy)
	}
	// Default returns a fresh value each time.
	f.Tools[0] = "x"
	if Default().Tools[0] != "agent" {
		t.Error("Default shares memory between calls")
	}
}
