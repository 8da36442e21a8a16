package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is one server tool bound to a thread. It implements tools.Tool and
// tools.Subjecter: permission rules' `match` sees the arguments' JSON.
type Tool struct {
	name, tool, desc string
	schema           json.RawMessage
	s                *session
	threadID         string
	outputCap        int
}

func (t *Tool) Name() string            { return t.name }
func (t *Tool) Description() string     { return t.desc }
func (t *Tool) Schema() json.RawMessage { return t.schema }

// Subject is the arguments as compact JSON.
func (t *Tool) Subject(args json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, args) != nil {
		return string(args)
	}
	return b.String()
}

// Run calls the tool. The result is the text of the call's content (see
// Render); a result the server marks as an error comes back as an error,
// as does a server that failed, stopped or did not answer in time.
func (t *Tool) Run(ctx context.Context, args json.RawMessage) (string, error) {
	if !json.Valid(args) {
		return "", fmt.Errorf("arguments are not valid JSON")
	}
	meta := sdk.Meta{MetaRunID: t.s.runID, MetaThreadID: t.threadID}
	res, err := t.s.call(ctx, t.tool, args, meta)
	if err != nil {
		return "", err
	}
	out := clip(Render(res), t.outputCap)
	if res.IsError {
		return "", fmt.Errorf("%s: %s", t.name, out)
	}
	return out, nil
}

// Render turns a call's result into the text the model sees: text content
// as it is, other content summarised on a line of its own ("[image:
// image/png, 1234 bytes]", "[audio: ...]", "[resource link: <uri> ...]",
// an embedded resource's text, or "[resource: <uri>, <mime>, N bytes]" for
// a binary one), parts separated by newlines. A result with no content but
// structured content is that JSON; an empty one is "(no output)".
func Render(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			s := "[resource link: " + c.URI
			if c.Name != "" {
				s += " (" + c.Name + ")"
			}
			if c.MIMEType != "" {
				s += ", " + c.MIMEType
			}
			parts = append(parts, s+"]")
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				parts = append(parts, "[resource]")
			case r.Text != "" || len(r.Blob) == 0:
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	out := strings.Join(parts, "\n")
	if strings.TrimSpace(out) == "" {
		return "(no output)"
	}
	return out
}

// clip bounds s to n bytes, keeping its start and saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", cut, len(s))
}
