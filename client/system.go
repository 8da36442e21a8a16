package client

import (
	"context"
	"net/http"
)

// ListApprovals returns the tool calls waiting for a person.
func (c *Client) ListApprovals(ctx context.Context) ([]Approval, error) {
	var as []Approval
	_, err := c.call(ctx, http.MethodGet, "/v1/approvals", nil, &as)
	return as, err
}

// Decide answers a waiting approval: allow runs the call, deny refuses it.
// A 409 if it was already answered or timed out.
func (c *Client) Decide(ctx context.Context, id string, allow bool) error {
	body := DecideRequest{Decision: "deny"}
	if allow {
		body.Decision = "allow"
	}
	_, err := c.call(ctx, http.MethodPost, "/v1/approvals/"+escape(id), body, nil)
	return err
}

// Workers lists the live workers.
func (c *Client) Workers(ctx context.Context) ([]Worker, error) {
	var ws []Worker
	_, err := c.call(ctx, http.MethodGet, "/v1/workers", nil, &ws)
	return ws, err
}

// Assets counts the cluster's JetStream streams and consumers by kind.
func (c *Client) Assets(ctx context.Context) (Assets, error) {
	var a Assets
	_, err := c.call(ctx, http.MethodGet, "/v1/assets", nil, &a)
	return a, err
}
