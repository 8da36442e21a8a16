package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/formica-run/formica/internal/policy"
)

// promptApprover asks the person at the terminal about each `ask` call, one
// question at a time however many helpers ask at once.
type promptApprover struct {
	out   io.Writer
	lines chan string
	view  *treeView
	mu    sync.Mutex // one question at a time
}

func newPromptApprover(in io.Reader, out io.Writer, view *treeView) *promptApprover {
	p := &promptApprover{out: out, lines: make(chan string), view: view}
	// One reader for the process: a blocked terminal read cannot be cancelled,
	// so questions abandoned by ctx leave it waiting for the next one.
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

func (p *promptApprover) Approve(ctx context.Context, req policy.ApprovalRequest) (policy.Approval, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.view.mu.Lock()
	defer p.view.mu.Unlock()
	p.view.eraseLocked()
	if req.InDoubt {
		fmt.Fprintf(p.out, "\n%s: this %s call was cut by a failure before its result, and may or may not have taken effect: %s\nRun it again? [y/N] ",
			req.ThreadPath, req.Tool, req.Arguments)
	} else {
		fmt.Fprintf(p.out, "\n%s wants to run %s %s\nAllow? [y/N] ", req.ThreadPath, req.Tool, req.Arguments)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(p.out)
		return policy.Approval{}, context.Cause(ctx)
	case line, ok := <-p.lines:
		if !ok {
			return policy.Approval{Reason: "no answer (stdin closed)"}, nil
		}
		answer := strings.ToLower(strings.TrimSpace(line))
		if answer == "y" || answer == "yes" {
			return policy.Approval{Allow: true}, nil
		}
		return policy.Approval{Reason: "denied at the terminal"}, nil
	}
}
