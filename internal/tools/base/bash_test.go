package base

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/tools"
)

func TestBash(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		f := newFixture(t, cfg)
		tests := []struct {
			name, args, want string
			sentinel         error
			errText          string
		}{
			{name: "stdout", args: `{"command":"echo hi"}`, want: "hi\n"},
			{name: "no output", args: `{"command":"true"}`, want: "(no output)"},
			{name: "runs in cwd", args: `{"command":"pwd"}`, want: f.root + "\n"},
			{name: "stderr and exit code", args: `{"command":"echo out; echo err >&2; exit 3"}`, want: "out\nerr\n[exit code: 3]"},
			{name: "exit code without output", args: `{"command":"exit 7"}`, want: "[exit code: 7]"},
			{name: "exit code after partial line", args: `{"command":"printf x; false"}`, want: "x\n[exit code: 1]"},
			{name: "signal", args: `{"command":"kill -9 $$"}`, want: "[terminated by signal: killed]"},
			{name: "missing command", args: `{}`, sentinel: tools.ErrBadArgs, errText: `missing required field "command"`},
			{name: "empty command", args: `{"command":""}`, sentinel: tools.ErrBadArgs, errText: `"command" must not be empty`},
			{name: "zero timeout", args: `{"command":"true","timeout_ms":0}`, sentinel: tools.ErrBadArgs, errText: `"timeout_ms" must be at least 1`},
			{name: "string timeout", args: `{"command":"true","timeout_ms":"5"}`, sentinel: tools.ErrBadArgs, errText: `"timeout_ms" must be an integer, got a string`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := f.run(t, BashName, tt.args)
				checkErr(t, err, tt.sentinel, tt.errText)
				if got != tt.want {
					t.Errorf("got %q, want %q", got, tt.want)
				}
			})
		}
	})
}

func TestBashEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai-leak")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-leak")
	t.Setenv("FORMICA_TEST_OTHER", "other-leak")
	t.Setenv("FORMICA_TEST_PASS", "passed")
	f := newFixture(t, Config{PassEnv: []string{"FORMICA_TEST_PASS"}})
	got, err := f.run(t, BashName, `{"command":"env; test -d \"$HOME\" && echo home-ok"}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "sk-", "leak", "FORMICA_TEST_OTHER"} {
		if strings.Contains(got, leak) {
			t.Errorf("environment leaks %q:\n%s", leak, got)
		}
	}
	for _, want := range []string{"\nFORMICA_TEST_PASS=passed\n", "\nTERM=dumb\n", "\nLANG=C.UTF-8\n", "\nLC_ALL=C.UTF-8\n", "\nPATH=", "\nTMPDIR=", "home-ok"} {
		if !strings.Contains("\n"+got, want) {
			t.Errorf("environment lacks %q:\n%s", want, got)
		}
	}
	if home := os.Getenv("HOME"); home != "" && strings.Contains(got, "\nHOME="+home+"\n") {
		t.Errorf("bash got this process's HOME %s", home)
	}
}

func TestBashOutputCap(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		cfg.OutputCap = 1000
		f := newFixture(t, cfg)
		got, err := f.run(t, BashName, `{"command":"printf 'start\\n'; head -c 100000 /dev/zero | tr '\\0' a; printf '\\nend\\n'; exit 2"}`)
		if err != nil {
			t.Fatal(err)
		}
		const omitted = 6 + 100000 + 5 - 1000
		if !strings.HasPrefix(got, "start\naaa") || !strings.HasSuffix(got, "aaa\nend\n[exit code: 2]") ||
			!strings.Contains(got, fmt.Sprintf("\n[output truncated: %d bytes omitted]\n", omitted)) {
			t.Errorf("capped output, %d bytes: %q ... %q", len(got), got[:min(60, len(got))], got[max(0, len(got)-60):])
		}
		if len(got) > 1200 {
			t.Errorf("capped output is %d bytes", len(got))
		}
	})
}

// startGroupChild is a command that starts a background sleep whose
// argument is marker, writes file pid once it runs, and waits for it (unless
// wait is false). The marker finds the sleep among the host's processes,
// whatever PID namespace it runs in.
func startGroupChild(marker string, wait bool) string {
	cmd := "sleep " + marker + " & echo $! > pid.tmp && mv pid.tmp pid"
	if wait {
		cmd += "; wait"
	}
	return cmd
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		f := newFixture(t, cfg)
		marker := newMarker()
		start := time.Now()
		// The timeout covers the sandbox's set-up too; 3s leaves a loaded
		// machine room to start the command and its background child.
		args, _ := json.Marshal(map[string]any{"command": startGroupChild(marker, true), "timeout_ms": 3000})
		got, err := f.run(t, BashName, string(args))
		if err != nil {
			t.Fatal(err)
		}
		if want := "[timed out after 3s; the command and its child processes were killed]"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("timed-out call took %v", d)
		}
		readPid(t, f.root)
		waitNoProcess(t, marker)
	})
}

func TestBashMaxTimeoutCaps(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		cfg.BashMaxTimeout = 300 * time.Millisecond
		f := newFixture(t, cfg)
		got, err := f.run(t, BashName, `{"command":"sleep 30","timeout_ms":60000}`)
		if want := "[timed out after 300ms; the command and its child processes were killed]"; err != nil || got != want {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	})
}

func TestBashCancelKillsGroup(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		f := newFixture(t, cfg)
		marker := newMarker()
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := f.tools[BashName].Run(ctx, json.RawMessage(fmt.Sprintf(`{"command":%q}`, startGroupChild(marker, true))))
			done <- result{out, err}
		}()
		readPid(t, f.root)
		stop := errors.New("run cancelled by test")
		cancel(stop)
		select {
		case r := <-done:
			if !errors.Is(r.err, stop) || r.out != "" {
				t.Errorf("cancelled call = %q, %v; want an error wrapping the cause", r.out, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after ctx cancel")
		}
		waitNoProcess(t, marker)
	})
}

// TestBashOrphanHoldingPipe: a background child that keeps the output pipe
// open after the shell exits neither hangs Run nor outlives it.
func TestBashOrphanHoldingPipe(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		f := newFixture(t, cfg)
		marker := newMarker()
		start := time.Now()
		got, err := f.run(t, BashName, fmt.Sprintf(`{"command":%q}`, startGroupChild(marker, false)+"; echo started"))
		if err != nil || got != "started\n" {
			t.Errorf("got %q, %v; want %q", got, err, "started\n")
		}
		if d := time.Since(start); d > waitDelay+5*time.Second {
			t.Errorf("call took %v", d)
		}
		readPid(t, f.root)
		waitNoProcess(t, marker)
	})
}

func TestBashConcurrent(t *testing.T) {
	modes(t, func(t *testing.T, cfg Config) {
		f := newFixture(t, cfg)
		errs := make(chan error, 8)
		for i := range 8 {
			go func() {
				ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
				defer cancel()
				out, err := f.tools[BashName].Run(ctx, json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i)))
				if err == nil && out != fmt.Sprintf("%d\n", i) {
					err = fmt.Errorf("call %d got %q", i, out)
				}
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// readPid polls, bounded, for the pid file written by startGroupChild.
func readPid(t *testing.T, root string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(root, "pid")); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file holds %q", b)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pid file after 10s")
	return 0
}

// BenchmarkBashTrue measures one bash call of `true`: the cost of the
// sandbox is the difference between the two.
func BenchmarkBashTrue(b *testing.B) {
	for _, mode := range []string{"plain", "sandboxed"} {
		b.Run(mode, func(b *testing.B) {
			cfg := Config{Cwd: b.TempDir()}
			if mode == "sandboxed" {
				sb, err := testSandbox()
				if err != nil {
					b.Skipf("no sandbox: %v", err)
				}
				cfg.Sandbox = sb
			}
			ts, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			bash := ts[len(ts)-1]
			args := json.RawMessage(`{"command":"true"}`)
			for b.Loop() {
				if out, err := bash.Run(b.Context(), args); err != nil || out != "(no output)" {
					b.Fatalf("%q, %v", out, err)
				}
			}
		})
	}
}
