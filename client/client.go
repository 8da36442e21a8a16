package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls one coordinator's HTTP API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// Option changes how a Client is made.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc (its
// transport, TLS settings, proxies). Do not give it a Timeout: it would
// cut event streams; bound calls with their contexts instead. The
// default is http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// New returns a Client of the API at baseURL (such as
// "http://127.0.0.1:8080"), sending token as its bearer token; an empty
// token sends none (a coordinator without a token serves loopback only).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("%w: base URL %q: %v", ErrConfig, baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q is not http(s)://host[:port]", ErrConfig, baseURL)
	}
	if token != strings.TrimSpace(token) {
		return nil, fmt.Errorf("%w: the token starts or ends with white space", ErrConfig)
	}
	c := &Client{base: u, token: token}
	for _, o := range opts {
		o(c)
	}
	c.hc = cmp.Or(c.hc, http.DefaultClient)
	return c, nil
}

// request makes a request to path (with its query), its body in is JSON
// when not nil.
func (c *Client) request(ctx context.Context, method, path string, in any) (*http.Request, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// call sends a request and decodes a 2xx answer's JSON into out (when not
// nil); other statuses are an *APIError.
func (c *Client) call(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	req, err := c.request(ctx, method, path, in)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, apiError(resp)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// get is a GET of path, its answer's JSON decoded as a T.
func get[T any](ctx context.Context, c *Client, path string) (T, error) {
	var out T
	_, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// apiError reads an error answer.
func apiError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body ErrorBody
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		return &APIError{StatusCode: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{StatusCode: resp.StatusCode, Message: msg}
}
