package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/formica-run/formica/internal/sandbox"
)

// maxRestarts is how often a server that stopped is started again for one
// run; after that its calls fail.
const maxRestarts = 1

// maxTools bounds the tools taken from one server's list.
const maxTools = 512

// session is one run's use of one server in one directory: a live
// connection when started, its tool list, and its crash count.
type session struct {
	p     *Pool
	name  string
	srv   Server
	runID string
	cwd   string

	mu      sync.Mutex
	c       *conn
	crashes int
	broken  error
	tools   []*sdk.Tool // cached list; nil when stale
	closed  bool
}

// conn is one started server: a client session and, for stdio, its process.
type conn struct {
	cs   *sdk.ClientSession
	done chan struct{} // closed when the session has ended
	kill func()        // ends the process (stdio); nil for HTTP
	// exit describes how a stdio process ended, once it has.
	mu     sync.Mutex
	exit   string
	stderr *tail
}

func (c *conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// why says how the connection ended, for error texts.
func (c *conn) why() string {
	c.mu.Lock()
	exit := c.exit
	c.mu.Unlock()
	if exit == "" {
		exit = "connection closed"
	}
	if c.stderr != nil {
		if s := c.stderr.String(); s != "" {
			exit += "; its last output: " + s
		}
	}
	return exit
}

func (c *conn) close() {
	_ = c.cs.Close()
	if c.kill != nil {
		c.kill()
	}
}

// ensure returns the live connection, starting the server when it is not
// running: lazily on first use, and once more after it stopped.
func (s *session) ensure(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: %q: the run's session is closed", ErrServer, s.name)
	}
	if s.c != nil {
		if !s.c.ended() {
			return s.c, nil
		}
		s.lostLocked(s.c)
	}
	if s.broken != nil {
		return nil, s.broken
	}
	c, err := s.start(ctx)
	if err != nil && ctx.Err() != nil {
		// The calling thread gave up: no fault of the server's.
		return nil, fmt.Errorf("%w: %q not started: %w", ErrServer, s.name, context.Cause(ctx))
	}
	if err != nil {
		s.crashes++
		err = fmt.Errorf("%w: %q could not start: %w", ErrServer, s.name, err)
		if s.crashes > maxRestarts {
			s.broken = fmt.Errorf("%w (it is not started again for this run)", err)
		}
		return nil, err
	}
	s.c = c
	return c, nil
}

// lostLocked forgets a connection that ended on its own and counts it.
func (s *session) lostLocked(c *conn) {
	if s.c != c {
		return
	}
	s.c, s.tools = nil, nil
	s.crashes++
	if s.crashes > maxRestarts {
		s.broken = fmt.Errorf("%w: %q stopped again after a restart (%s); it is not started again for this run", ErrServer, s.name, c.why())
	}
	s.p.cfg.Logger.Warn("MCP server stopped", "server", s.name, "run_id", s.runID, "why", c.why(), "crashes", s.crashes)
}

// crashed is the error of a call during which the server stopped.
func (s *session) crashed(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostLocked(c)
	if s.broken != nil {
		return s.broken
	}
	return fmt.Errorf("%w: %q stopped during the call (%s); it is started again on the next call", ErrServer, s.name, c.why())
}

// close ends the session for good (the run's last thread here ended).
func (s *session) close() {
	s.mu.Lock()
	c := s.c
	s.c, s.closed = nil, true
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// list returns the server's tools, from the cache unless the server said
// its list changed.
func (s *session) list(ctx context.Context) ([]*sdk.Tool, error) {
	c, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	cached := s.tools
	s.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	lctx, cancel := context.WithTimeout(ctx, s.srv.CallTimeout())
	defer cancel()
	var all []*sdk.Tool
	for t, err := range c.cs.Tools(lctx, nil) {
		if err != nil {
			if c.ended() {
				return nil, s.crashed(c)
			}
			return nil, fmt.Errorf("%w: %q: list tools: %w", ErrServer, s.name, err)
		}
		if len(all) == maxTools {
			s.p.cfg.Logger.Warn("MCP server lists too many tools; the rest are left out", "server", s.name, "max", maxTools)
			break
		}
		all = append(all, t)
	}
	if all == nil {
		all = []*sdk.Tool{}
	}
	s.mu.Lock()
	if s.c == c {
		s.tools = all
	}
	s.mu.Unlock()
	return all, nil
}

// invalidate drops the cached tool list (notifications/tools/list_changed).
func (s *session) invalidate() {
	s.mu.Lock()
	s.tools = nil
	s.mu.Unlock()
	s.p.version.Add(1)
}

// call calls one tool, bounded by the server's timeout.
func (s *session) call(ctx context.Context, tool string, args []byte, meta sdk.Meta) (*sdk.CallToolResult, error) {
	c, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	timeout := s.srv.CallTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := c.cs.CallTool(cctx, &sdk.CallToolParams{Meta: meta, Name: tool, Arguments: rawJSON(args)})
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("call abandoned: %w", context.Cause(ctx))
	}
	if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "EOF") || c.ended() {
		// The session notices a dead process a moment after the call does.
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
		}
		if c.ended() {
			return nil, s.crashed(c)
		}
	}
	if cctx.Err() != nil {
		return nil, fmt.Errorf("%w: %q did not answer %s within %v", ErrServer, s.name, tool, timeout)
	}
	return nil, fmt.Errorf("%w: %q: %s: %w", ErrServer, s.name, tool, err)
}

// rawJSON passes arguments through as they are.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// start starts (stdio) or connects to (HTTP) the server and initialises a
// session, within the server's timeout.
func (s *session) start(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.srv.CallTimeout())
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "formica", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.invalidate() },
	})
	c := &conn{done: make(chan struct{})}
	var t sdk.Transport
	if s.srv.Stdio() {
		var err error
		if t, err = s.spawn(c); err != nil {
			return nil, err
		}
	} else {
		t = &sdk.StreamableClientTransport{
			Endpoint:   s.srv.URL,
			HTTPClient: &http.Client{Transport: headers{base: http.DefaultTransport, h: s.srv.Headers}},
			MaxRetries: 1,
		}
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		if c.kill == nil {
			return nil, err
		}
		c.kill()
		return nil, fmt.Errorf("%w (%s)", err, c.why())
	}
	c.cs = cs
	go func() {
		_ = cs.Wait()
		close(c.done)
	}()
	return c, nil
}

// spawn starts a stdio server's process, in the sandbox when the worker has
// one, and returns the transport over its stdin and stdout.
func (s *session) spawn(c *conn) (sdk.Transport, error) {
	bin, err := exec.LookPath(s.srv.Command)
	if err != nil {
		return nil, err
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	c.stderr = &tail{max: 2048}
	env := s.env()
	argv := append([]string{bin}, s.srv.Args...)
	exited := func(desc string) {
		c.mu.Lock()
		c.exit = desc
		c.mu.Unlock()
		outW.Close() // EOF for the session: the process is gone
		inR.Close()
	}
	if sb := s.p.cfg.Sandbox; sb != nil {
		readOnly := make([]string, 0, len(s.srv.ReadOnly))
		for _, p := range s.srv.ReadOnly {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				readOnly = append(readOnly, r)
			}
		}
		life, stop := context.WithCancel(context.Background())
		c.kill = stop
		s.p.procs.Add(1)
		go func() {
			defer s.p.procs.Done()
			exit, err := sb.Run(life, sandbox.Request{
				Dir: s.cwd, Argv: argv, Env: env, Network: s.srv.Network, ReadOnly: readOnly,
				Stdin: inR, Stderr: c.stderr,
			}, outW)
			switch {
			case err != nil:
				exited(err.Error())
			case exit.Killed:
				exited("killed")
			case exit.Signal != 0:
				exited("killed by signal " + exit.Signal.String())
			default:
				exited(fmt.Sprintf("exit status %d", exit.Code))
			}
		}()
	} else {
		cmd := exec.Command(bin, s.srv.Args...)
		cmd.Dir, cmd.Env = s.cwd, env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			outR.Close()
			outW.Close()
			inR.Close()
			inW.Close()
			return nil, err
		}
		pid := cmd.Process.Pid
		c.kill = func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
		s.p.procs.Add(1)
		go func() {
			defer s.p.procs.Done()
			err := cmd.Wait()
			_ = syscall.Kill(-pid, syscall.SIGKILL) // what it left behind
			if err == nil {
				err = errors.New("exit status 0")
			}
			exited(strings.TrimPrefix(err.Error(), "signal: "))
		}()
	}
	return &sdk.IOTransport{Reader: outR, Writer: inW}, nil
}

// env is a stdio server's whole environment: a minimal base and its config's.
func (s *session) env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	m := map[string]string{"PATH": path, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
	if s.p.cfg.Sandbox == nil {
		m["HOME"], m["TMPDIR"] = os.TempDir(), os.TempDir()
	}
	maps.Copy(m, s.srv.Env)
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// headers adds a server's configured headers to every request.
type headers struct {
	base http.RoundTripper
	h    map[string]string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// tail keeps the last max bytes written (a server's stderr, for errors).
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
