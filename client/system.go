package client

import (
	"context"
	"net/http"
	"net/url"
)

// ListApprovals returns the tool calls waiting for a person.
func (c *Client) ListApprovals(ctx context.Context) ([]Approval, error) {
	return get[[]Approval](ctx, c, "/v1/approvals")
}

// Decide answers a waiting approval: allow runs the call, deny refuses it.
// A 409 if it was already answered or timed out.
func (c *Client) Decide(ctx context.Context, id string, allow bool) error {
	body := DecideRequest{Decision: "deny"}
	if allow {
		body.Decision = "allow"
	}
	_, err := c.call(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id), body, nil)
	return err
}

// Workers lists the live workers.
func (c *Client) Workers(ctx context.Context) ([]Worker, error) {
	return get[[]Worker](ctx, c, "/v1/workers")
}

// Assets counts the cluster's JetStream streams and consumers by kind.
func (c *Client) Assets(ctx context.Context) (Assets, error) {
	return get[Assets](ctx, c, "/v1/assets")
}
