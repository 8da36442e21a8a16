package policy

import "context"

// ApprovalRequest asks whoever answers for a run whether one tool call may run.
// It names the exact call so a person can judge it.
type ApprovalRequest struct {
	RunID    string `json:"run_id" msgpack:"run_id"`
	ThreadID string `json:"thread_id" msgpack:"thread_id"`
	// ThreadPath is the names from the root thread down to the caller (formica/name/...).
	ThreadPath string `json:"thread_path" msgpack:"thread_path"`
	Tool       string `json:"tool" msgpack:"tool"`
	Arguments  string `json:"arguments" msgpack:"arguments"`
	// CallID is the tool call's key within its thread (journal.CallKey): a
	// request asked again for the same call gets the same decision.
	CallID string `json:"call_id,omitempty" msgpack:"call_id,omitempty"`
	// InDoubt asks about a call of an at-most-once tool that a failure
	// cut before its result (harness.in_doubt ask): it may or may not have
	// taken effect. Allow runs it again; deny reports it in doubt.
	InDoubt bool `json:"in_doubt,omitempty" msgpack:"in_doubt,omitempty"`
}

// Approval is the answer to an ApprovalRequest.
type Approval struct {
	Allow  bool   `json:"allow" msgpack:"allow"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// Approver answers `ask` decisions. An error (including ctx ending) counts as a
// denial; implementations must return when ctx is done.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// ApproverFunc adapts a function to an Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Approval, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Approval, error) {
	return f(ctx, req)
}

// AllowAll approves every request; DenyAll denies every request.
var (
	AllowAll Approver = ApproverFunc(func(context.Context, ApprovalRequest) (Approval, error) {
		return Approval{Allow: true}, nil
	})
	DenyAll Approver = ApproverFunc(func(context.Context, ApprovalRequest) (Approval, error) {
		return Approval{Reason: "denied by default"}, nil
	})
)
