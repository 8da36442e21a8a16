package base

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/tools"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeTestFile(t, file, "")
	tests := []struct {
		name     string
		cfg      Config
		want     []string
		sentinel error
		errText  string
	}{
		{name: "all", cfg: Config{Cwd: dir}, want: Names()},
		{name: "canonical order, once", cfg: Config{Cwd: dir, Tools: []string{"bash", "read_file", "bash"}}, want: []string{"read_file", "bash"}},
		{name: "none", cfg: Config{Cwd: dir, Tools: []string{}}, want: nil},
		{name: "unknown tool", cfg: Config{Cwd: dir, Tools: []string{"read_file", "rm"}}, sentinel: tools.ErrUnknownTool, errText: `"rm"`},
		{name: "no cwd", cfg: Config{}, sentinel: ErrBadConfig, errText: "cwd"},
		{name: "missing cwd", cfg: Config{Cwd: filepath.Join(dir, "nope")}, sentinel: ErrBadConfig, errText: "cwd"},
		{name: "cwd is a file", cfg: Config{Cwd: file}, sentinel: ErrBadConfig, errText: "not a directory"},
		{name: "timeout over max", cfg: Config{Cwd: dir, BashTimeout: time.Hour, BashMaxTimeout: time.Minute}, sentinel: ErrBadConfig, errText: "exceeds"},
		{name: "negative timeout", cfg: Config{Cwd: dir, BashTimeout: -1}, sentinel: ErrBadConfig, errText: "BashTimeout"},
		{name: "negative cap", cfg: Config{Cwd: dir, OutputCap: -1}, sentinel: ErrBadConfig, errText: "OutputCap"},
		{name: "provider key", cfg: Config{Cwd: dir, PassEnv: []string{"OPENAI_API_KEY"}}, sentinel: ErrBadConfig, errText: "OPENAI_API_KEY"},
		{name: "bad env name", cfg: Config{Cwd: dir, PassEnv: []string{"A=B"}}, sentinel: ErrBadConfig, errText: "A=B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := New(tt.cfg)
			checkErr(t, err, tt.sentinel, tt.errText)
			if got := tools.Names(ts); !slices.Equal(got, tt.want) {
				t.Errorf("tools %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	ts, err := New(Config{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := ts[0].(*readFile).h
	if h.BashTimeout != DefaultBashTimeout || h.BashMaxTimeout != DefaultBashMaxTimeout || h.OutputCap != DefaultOutputCap {
		t.Errorf("defaults: %v %v %d", h.BashTimeout, h.BashMaxTimeout, h.OutputCap)
	}
	ts, err = New(Config{Cwd: t.TempDir(), BashMaxTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if h := ts[0].(*readFile).h; h.BashTimeout != time.Second {
		t.Errorf("default timeout under a small max = %v, want 1s", h.BashTimeout)
	}
}

func TestNewResolvesSymlinkedCwd(t *testing.T) {
	root := realDir(t, t.TempDir())
	alias := filepath.Join(realDir(t, t.TempDir()), "alias")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	ts, err := New(Config{Cwd: alias, Tools: []string{BashName}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ts[0].(*bashTool).h.root; got != root {
		t.Errorf("root %q, want %q", got, root)
	}
}

// TestSchemas checks every tool's schema is the object its decode accepts.
func TestSchemas(t *testing.T) {
	ts, err := New(Config{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range ts {
		var s struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(tl.Schema(), &s); err != nil {
			t.Fatalf("%s: schema: %v", tl.Name(), err)
		}
		if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties || len(s.Properties) == 0 {
			t.Errorf("%s: schema %s", tl.Name(), tl.Schema())
		}
		if _, ok := tl.(tools.Subjecter); !ok {
			t.Errorf("%s is not a tools.Subjecter", tl.Name())
		}
		if tl.Description() == "" {
			t.Errorf("%s has no description", tl.Name())
		}
		// Each required field, when missing, is named in the error.
		for _, req := range s.Required {
			args := map[string]any{}
			for name, raw := range s.Properties {
				if name != req && strings.Contains(string(raw), `"string"`) {
					args[name] = "x"
				}
			}
			b, _ := json.Marshal(args)
			_, err := tl.Run(t.Context(), b)
			if !errors.Is(err, tools.ErrBadArgs) || !strings.Contains(err.Error(), `"`+req+`"`) {
				t.Errorf("%s without %s: %v", tl.Name(), req, err)
			}
		}
	}
}

func TestBadArgs(t *testing.T) {
	f := newFixture(t, Config{})
	tests := []struct {
		tool, args, errText string
	}{
		{ReadFileName, `{"path":`, "unparsable JSON"},
		{ReadFileName, `[1]`, "must be a JSON object"},
		{ReadFileName, `null`, "must be a JSON object"},
		{ReadFileName, ``, `missing required field "path"`},
		{ReadFileName, `{"path":null}`, `missing required field "path"`},
		{ReadFileName, `{"path":1}`, `field "path" must be a string, got a number`},
		{ReadFileName, `{"path":"a","limit":1.5}`, `field "limit" must be an integer, got a number 1.5`},
		{ReadFileName, `{"path":"a","Path":"b"}`, `unknown field "Path" (fields: path, offset, limit)`},
		{WriteFileName, `{"path":"a","content":"x","mode":"0777"}`, `unknown field "mode"`},
		{ListDirName, `{"path":""}`, `field "path" must not be empty`},
		{GlobName, `{"pattern":["*"]}`, `field "pattern" must be a string, got an array`},
		{GrepName, `{"pattern":"x","path":true}`, `field "path" must be a string, got a boolean`},
		{BashName, `{"command":"true","timeout_ms":{}}`, `field "timeout_ms" must be an integer, got an object`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			got, err := f.run(t, tt.tool, tt.args)
			checkErr(t, err, tools.ErrBadArgs, tt.errText)
			if got != "" {
				t.Errorf("result %q with bad arguments", got)
			}
		})
	}
}

func TestSubject(t *testing.T) {
	f := newFixture(t, Config{})
	f.file(t, "a.txt", "")
	f.file(t, "secrets/key", "")
	f.link(t, "secrets/key", "innocent")
	f.link(t, "secrets", "docs")
	f.escapes(t)
	tests := []struct {
		tool, args, want string
	}{
		{ReadFileName, `{"path":"./sub/../a.txt"}`, "a.txt"},
		{ReadFileName, `{"path":"innocent"}`, "secrets/key"},
		{EditFileName, `{"path":"docs/key","old":"a","new":"b"}`, "secrets/key"},
		{WriteFileName, `{"path":"docs/new/x.txt","content":""}`, "secrets/new/x.txt"},
		{WriteFileName, `{"path":"` + filepath.Join(f.root, "a.txt") + `"}`, "a.txt"},
		{ListDirName, `{"path":"."}`, "."},
		{ReadFileName, `{"path":"../x"}`, "../x"},
		{ReadFileName, `{"path":"outfile"}`, "outfile"},
		{ReadFileName, `{"path":"` + filepath.Join(f.outside, "s") + `"}`, "../" + filepath.Base(f.outside) + "/s"},
		{GrepName, `{"pattern":"x"}`, "."},
		{GrepName, `{"pattern":"x","path":"docs"}`, "secrets"},
		{GlobName, `{"pattern":"src/**/*.go"}`, "src/**/*.go"},
		{BashName, `{"command":"  git status "}`, "git status"},
		{ReadFileName, `not json`, ""},
		{BashName, `{"command":1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			got := f.tools[tt.tool].(tools.Subjecter).Subject(json.RawMessage(tt.args))
			if got != tt.want {
				t.Errorf("Subject = %q, want %q", got, tt.want)
			}
		})
	}
	// The subject is what permission rules see: a symlink alias cannot dodge a rule.
	pol := policy.Permission{Rules: []policy.Rule{{Tool: "*", Match: "secrets/*", Decision: policy.Deny}}}
	subj := f.tools[ReadFileName].(tools.Subjecter).Subject(json.RawMessage(`{"path":"innocent"}`))
	if d := pol.Decide(ReadFileName, subj); d != policy.Deny {
		t.Errorf("read through alias decided %s, want deny", d)
	}
}
