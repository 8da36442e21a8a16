package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/formica-run/formica/internal/spec"
)

// Limits of a configuration file.
const (
	maxConfigBytes = 1 << 20
	maxServers     = 64
	maxArgs        = 256
	maxEnv         = 256
	// DefaultTimeout bounds one call (and a server's start) when the
	// server's config gives no timeout.
	DefaultTimeout = time.Minute
	maxTimeout     = time.Hour
)

// ToolPrefix starts the name of every MCP tool: mcp__<server>__<tool>.
const ToolPrefix = "mcp__"

// Server is one server of the file: a stdio command or a streamable HTTP URL.
type Server struct {
	// Command is the program of a stdio server, a path or a name looked up
	// in PATH; Args its arguments; Env its whole environment besides a
	// minimal PATH, HOME, TMPDIR and LANG (nothing of the worker's own
	// environment reaches it).
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Network lets a sandboxed stdio server use the network (default off).
	Network bool `json:"network,omitempty"`
	// ReadOnly are host paths a sandboxed stdio server may read besides the
	// system directories and the thread's cwd: its installation, say.
	ReadOnly []string `json:"read_only,omitempty"`

	// URL is the endpoint of a streamable HTTP server; Headers are sent
	// with every request (an Authorization header, say).
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Type is optional: "stdio", or "http" / "streamable-http"; it must
	// agree with command or url.
	Type string `json:"type,omitempty"`
	// Timeout bounds each call and the server's start, a Go duration
	// ("30s"); default DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`

	timeout time.Duration
}

// Stdio reports whether the server is a command (else an HTTP endpoint).
func (s Server) Stdio() bool { return s.Command != "" }

// CallTimeout is the bound of one call.
func (s Server) CallTimeout() time.Duration {
	if s.timeout <= 0 {
		return DefaultTimeout
	}
	return s.timeout
}

// Servers is a parsed configuration: servers by name.
type Servers map[string]Server

// Names returns the server names, sorted.
func (ss Servers) Names() []string {
	return slices.Sorted(maps.Keys(ss))
}

// Load reads and parses a configuration file.
func Load(path string) (Servers, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadConfig, path, err)
	}
	ss, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ss, nil
}

// Parse decodes and checks a configuration in the mcpServers shape:
//
//	{"mcpServers": {
//	  "<name>": {"command": "...", "args": [...], "env": {...}},
//	  "<name>": {"url": "https://...", "headers": {...}}}}
//
// Unknown keys, a server with both or neither of command and url, a bad
// name, URL or timeout are errors (wrapping ErrBadConfig), all reported
// at once, each naming its server and field.
func Parse(data []byte) (Servers, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadConfig, maxConfigBytes)
	}
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := strict(data, &file); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if file.MCPServers == nil {
		return nil, fmt.Errorf("%w: no \"mcpServers\" object", ErrBadConfig)
	}
	if len(file.MCPServers) > maxServers {
		return nil, fmt.Errorf("%w: %d servers (at most %d)", ErrBadConfig, len(file.MCPServers), maxServers)
	}
	out := Servers{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(file.MCPServers)) {
		s, err := parseServer(name, file.MCPServers[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: server %q: %w", ErrBadConfig, name, err))
			continue
		}
		out[name] = s
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// strict decodes one JSON value, refusing unknown fields and trailing data.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func parseServer(name string, raw json.RawMessage) (Server, error) {
	var s Server
	if !spec.ValidServerName(name) {
		return s, errors.New("name must be 1-32 letters, digits, '_' or '-', without \"__\"")
	}
	if err := strict(raw, &s); err != nil {
		return s, err
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case s.Command != "" && s.URL != "":
		bad("has both command (stdio) and url (HTTP); give one")
	case s.Command == "" && s.URL == "":
		bad("needs command (stdio) or url (streamable HTTP)")
	}
	switch s.Type {
	case "":
	case "stdio":
		if s.Command == "" {
			bad("type stdio needs a command")
		}
	case "http", "streamable-http", "streamableHttp":
		if s.URL == "" {
			bad("type %s needs a url", s.Type)
		}
	case "sse":
		bad("type sse is not supported; serve streamable HTTP instead")
	default:
		bad("type %q: want stdio or http", s.Type)
	}
	if s.Command != "" {
		if strings.ContainsRune(s.Command, 0) {
			bad("command has a NUL byte")
		}
		if len(s.Args) > maxArgs {
			bad("%d args (at most %d)", len(s.Args), maxArgs)
		}
		for i, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				bad("args[%d] has a NUL byte", i)
			}
		}
		if len(s.Env) > maxEnv {
			bad("%d env entries (at most %d)", len(s.Env), maxEnv)
		}
		for k, v := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				bad("env %q: not a variable name and value", k)
			}
		}
		for i, p := range s.ReadOnly {
			if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
				bad("read_only[%d] %q: want an absolute path other than /", i, p)
			}
		}
	} else {
		if len(s.Args) > 0 || len(s.Env) > 0 || len(s.ReadOnly) > 0 || s.Network {
			bad("args, env, read_only and network are for stdio servers, not url")
		}
		u, err := url.Parse(s.URL)
		if s.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			bad("url %q: want an http or https URL", s.URL)
		}
		for k, v := range s.Headers {
			if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
				bad("header %q: not a header name and value", k)
			}
		}
	}
	if s.Command != "" && len(s.Headers) > 0 {
		bad("headers are for url servers, not stdio")
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		switch {
		case err != nil:
			bad("timeout %q is not a duration like 30s", s.Timeout)
		case d <= 0 || d > maxTimeout:
			bad("timeout %q: want more than 0 and at most %v", s.Timeout, maxTimeout)
		}
		s.timeout = d
	}
	return s, errors.Join(errs...)
}
