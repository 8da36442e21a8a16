package mcp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/spec"
	"github.com/google/go-cmp/cmp"
)

func TestParseGood(t *testing.T) {
	ss, err := Parse([]byte(`{"mcpServers": {
		"github": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "x"}, "network": true, "timeout": "30s"},
		"docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer t"}},
		"fs": {"type": "stdio", "command": "/usr/bin/node", "read_only": ["/opt/mcp"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"docs", "fs", "github"}, ss.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if g := ss["github"]; !g.Stdio() || g.CallTimeout() != 30*time.Second || !g.Network || g.Env["TOKEN"] != "x" {
		t.Errorf("github = %+v", g)
	}
	if d := ss["docs"]; d.Stdio() || d.CallTimeout() != DefaultTimeout || d.Headers["Authorization"] != "Bearer t" {
		t.Errorf("docs = %+v", d)
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"not json", `{`, "unexpected EOF"},
		{"no servers", `{}`, `no "mcpServers"`},
		{"unknown top key", `{"mcpServers": {}, "extra": 1}`, `unknown field "extra"`},
		{"trailing data", `{"mcpServers": {}} {}`, "data after"},
		{"unknown server key", `{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}`, `server "a": json: unknown field "cwd"`},
		{"both", `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`, "both command"},
		{"neither", `{"mcpServers": {"a": {}}}`, "needs command"},
		{"bad name", `{"mcpServers": {"a.b": {"command": "x"}}}`, "name must be"},
		{"double underscore", `{"mcpServers": {"a__b": {"command": "x"}}}`, "name must be"},
		{"bad url", `{"mcpServers": {"a": {"url": "file:///etc/passwd"}}}`, "want an http or https URL"},
		{"sse", `{"mcpServers": {"a": {"type": "sse", "url": "http://h/"}}}`, "sse is not supported"},
		{"type mismatch", `{"mcpServers": {"a": {"type": "stdio", "url": "http://h/"}}}`, "type stdio needs a command"},
		{"bad timeout", `{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`, "not a duration"},
		{"negative timeout", `{"mcpServers": {"a": {"command": "x", "timeout": "-1s"}}}`, "want more than 0"},
		{"env on url", `{"mcpServers": {"a": {"url": "http://h/", "env": {"A": "b"}}}}`, "for stdio servers"},
		{"headers on stdio", `{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}`, "for url servers"},
		{"bad env", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "c"}}}}`, "not a variable name"},
		{"header injection", `{"mcpServers": {"a": {"url": "http://h/", "headers": {"A": "b\r\nX: y"}}}}`, "not a header"},
		{"relative read_only", `{"mcpServers": {"a": {"command": "x", "read_only": ["opt"]}}}`, "want an absolute path"},
		{"wrong type", `{"mcpServers": {"a": {"command": 1}}}`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			if err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want ErrBadConfig saying %q", err, tc.want)
			}
		})
	}
}

func TestParseReportsEveryServer(t *testing.T) {
	_, err := Parse([]byte(`{"mcpServers": {"a": {}, "b": {"url": "ftp://x"}}}`))
	if err == nil || !strings.Contains(err.Error(), `server "a"`) || !strings.Contains(err.Error(), `server "b"`) {
		t.Fatalf("Parse = %v, want both servers named", err)
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mcp.json")
	if _, err := Load(p); !errors.Is(err, ErrBadConfig) {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(p, []byte(`{"mcpServers": {"x": {"command": "true"}}}`), 0o600)
	ss, err := Load(p)
	if err != nil || len(ss) != 1 {
		t.Fatalf("Load = %v, %v", ss, err)
	}
	os.WriteFile(p, make([]byte, maxConfigBytes+2), 0o600)
	if _, err := Load(p); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("large file: %v", err)
	}
}

func TestToolName(t *testing.T) {
	for _, tc := range []struct{ server, tool, want string }{
		{"github", "search_issues", "mcp__github__search_issues"},
		{"fs", "read.file/x", "mcp__fs__read_file_x"},
		{"everything", "get-sum", "mcp__everything__get-sum"},
		{"a", strings.Repeat("x", 60), ""},
		{"a", "", ""},
	} {
		if got := ToolName(tc.server, tc.tool); got != tc.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
	}
}

// FuzzParse: no input crashes the decoder, and what it accepts is valid.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x", "args": ["y"], "env": {"K": "v"}}}}`))
	f.Add([]byte(`{"mcpServers": {"b": {"url": "https://h/mcp", "headers": {"A": "b"}, "timeout": "5s"}}}`))
	f.Add([]byte(`{"mcpServers": {"a__b": {"type": "sse"}}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ss, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("error %v does not wrap ErrBadConfig", err)
			}
			return
		}
		for name, s := range ss {
			if !spec.ValidServerName(name) || (s.Command == "") == (s.URL == "") || s.CallTimeout() <= 0 {
				t.Fatalf("accepted invalid server %q: %+v", name, s)
			}
		}
	})
}
