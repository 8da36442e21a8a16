package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Submit queues a run and returns its id. Submitting the same ID again
// returns the same run; with a different task or spec it is a 409.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (string, error) {
	var out SubmitResponse
	_, err := c.call(ctx, http.MethodPost, "/v1/runs", req, &out)
	return out.RunID, err
}

// GetRun returns a run's record.
func (c *Client) GetRun(ctx context.Context, id string) (Run, error) {
	return get[Run](ctx, c, "/v1/runs/"+url.PathEscape(id))
}

// ListOptions filter and page a run listing.
type ListOptions struct {
	// Status lists only runs with this status; empty lists all.
	Status Status
	// Limit is at most how many runs come back; zero is the server's
	// default (50).
	Limit int
	// Page is the cursor of the page to list, as a previous ListRuns
	// returned it; empty for the newest runs.
	Page string
}

// ListRuns lists run records, newest first. next is the cursor of the
// following page, empty at the end.
func (c *Client) ListRuns(ctx context.Context, opts ListOptions) (runs []Run, next string, err error) {
	q := url.Values{}
	if opts.Status != "" {
		q.Set("status", string(opts.Status))
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Page != "" {
		q.Set("page", opts.Page)
	}
	path := "/v1/runs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	h, err := c.call(ctx, http.MethodGet, path, nil, &runs)
	if err != nil {
		return nil, "", err
	}
	return runs, nextPage(h.Get("Link")), nil
}

// nextPage reads the cursor of a Link header's rel="next" page.
func nextPage(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err == nil {
			return u.Query().Get("page")
		}
	}
	return ""
}

// CancelRun cancels a queued or running run and its whole tree; a 409 if
// it had finished.
func (c *Client) CancelRun(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/cancel", nil, nil)
	return err
}

// CancelThread cancels one thread of a running run and its subtree; its
// parent sees the helper fail and goes on.
func (c *Client) CancelThread(ctx context.Context, runID, threadID string) error {
	_, err := c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/threads/"+url.PathEscape(threadID)+"/cancel", nil, nil)
	return err
}

// ResumeRun runs a failed or cancelled run again under its id, reusing
// its finished threads' work; a 409 for a run in another state.
func (c *Client) ResumeRun(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/resume", nil, nil)
	return err
}

// Threads lists a run's threads from its journal, root first.
func (c *Client) Threads(ctx context.Context, id string) ([]Thread, error) {
	return get[[]Thread](ctx, c, "/v1/runs/"+url.PathEscape(id)+"/threads")
}

// Transcript returns one thread's transcript.
func (c *Client) Transcript(ctx context.Context, runID, threadID string) (Transcript, error) {
	return get[Transcript](ctx, c, "/v1/runs/"+url.PathEscape(runID)+"/threads/"+url.PathEscape(threadID))
}
