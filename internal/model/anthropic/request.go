package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/formica-run/formica/internal/model"
)

// reservedArgs are request fields this package owns; an arg may not replace
// them (a "stream": true would turn the answer into server-sent events).
var reservedArgs = map[string]bool{"model": true, "messages": true, "system": true, "tools": true, "stream": true}

// droppedArgs are args other providers know and the Messages API refuses;
// they are dropped (and logged) so one spec can run against either provider.
var droppedArgs = map[string]bool{"seed": true, "frequency_penalty": true, "presence_penalty": true}

// params maps a model.Request onto the SDK's request and names the args it
// dropped. Errors wrap model.ErrBadRequest.
func (m *Model) params(req model.Request) (anthropic.MessageNewParams, []string, error) {
	var p anthropic.MessageNewParams
	p.Model = cmp.Or(req.Model, m.model)
	if p.Model == "" {
		return p, nil, badRequest("no model name in the request or the config")
	}
	var err error
	if p.System, p.Messages, err = messages(req.Messages); err != nil {
		return p, nil, err
	}
	if p.Tools, err = tools(req.Tools); err != nil {
		return p, nil, err
	}
	if len(p.Tools) > 0 {
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{
			DisableParallelToolUse: param.NewOpt(!req.ParallelToolCalls),
		}}
	}
	dropped, err := applyArgs(&p, req.Args)
	if err != nil {
		return p, nil, err
	}
	breakpoints(&p)
	return p, dropped, nil
}

// breakpoints marks where the API may cache the prompt (cache_control
// ephemeral), at most four places, the API's limit:
//
//   - the last tool definition: the tools, which come first in the prompt;
//   - the last system block: the tools and the system prompt;
//   - the end of the conversation as the previous request sent it (the last
//     block of the user turn before the last assistant turn), which the
//     previous request wrote to the cache: this request reads it back
//     however many blocks the last turn added (the API looks back only 20
//     blocks from a breakpoint for an earlier entry);
//   - the last block of the conversation, so that the next request, which
//     extends this one, reads all of it.
//
// Thinking blocks cannot carry a breakpoint; a turn's last other block
// does. A prompt shorter than the model's minimum is not cached, which
// costs nothing.
func breakpoints(p *anthropic.MessageNewParams) {
	mark := func(cc *anthropic.CacheControlEphemeralParam) {
		if cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	if n := len(p.Tools); n > 0 {
		mark(p.Tools[n-1].GetCacheControl())
	}
	if n := len(p.System); n > 0 {
		mark(&p.System[n-1].CacheControl)
	}
	last := len(p.Messages) - 1
	if last < 0 {
		return
	}
	markTurn(p.Messages[last], mark)
	// The previous request ended with the user turn before this
	// request's last assistant turn.
	for i := last - 1; i > 0; i-- {
		if p.Messages[i].Role == anthropic.MessageParamRoleAssistant {
			if p.Messages[i-1].Role == anthropic.MessageParamRoleUser {
				markTurn(p.Messages[i-1], mark)
			}
			break
		}
	}
}

// markTurn marks the last block of a turn that can carry a breakpoint.
func markTurn(m anthropic.MessageParam, mark func(*anthropic.CacheControlEphemeralParam)) {
	for j := len(m.Content) - 1; j >= 0; j-- {
		if cc := m.Content[j].GetCacheControl(); cc != nil {
			mark(cc)
			return
		}
	}
}

// messages maps the conversation. System messages, wherever they stand, go
// to the system parameter in order. Consecutive messages of one API role are
// merged into one turn, which is how tool results (role user) and a user
// message after them must travel; tool results come first in their turn
// because they follow the assistant turn that asked for them.
func messages(in []model.Message) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	var system []anthropic.TextBlockParam
	var out []anthropic.MessageParam
	add := func(role anthropic.MessageParamRole, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for i, msg := range in {
		switch msg.Role {
		case model.RoleSystem:
			if msg.Content != "" {
				system = append(system, anthropic.TextBlockParam{Text: msg.Content})
			}
		case model.RoleUser:
			add(anthropic.MessageParamRoleUser, text(msg.Content)...)
		case model.RoleAssistant:
			// Thinking comes first, as the API returned it: with tools in
			// use, it refuses a turn whose thinking blocks are missing.
			var blocks []anthropic.ContentBlockParamUnion
			for _, r := range msg.Reasoning {
				if r.Redacted != "" {
					blocks = append(blocks, anthropic.NewRedactedThinkingBlock(r.Redacted))
				} else {
					blocks = append(blocks, anthropic.NewThinkingBlock(r.Signature, r.Text))
				}
			}
			blocks = append(blocks, text(msg.Content)...)
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, toolInput(tc.Arguments), tc.Name))
			}
			add(anthropic.MessageParamRoleAssistant, blocks...)
		case model.RoleTool:
			if msg.ToolCallID == "" {
				return nil, nil, badRequest(fmt.Sprintf("message %d: tool result without a tool call id", i))
			}
			result := anthropic.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
			if msg.Content != "" {
				result.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: msg.Content}}}
			}
			add(anthropic.MessageParamRoleUser, anthropic.ContentBlockParamUnion{OfToolResult: &result})
		default:
			return nil, nil, badRequest(fmt.Sprintf("message %d: unknown role %q", i, msg.Role))
		}
	}
	return system, out, nil
}

// text is the text block of s, or none: the API rejects empty text blocks.
func text(s string) []anthropic.ContentBlockParamUnion {
	if s == "" {
		return nil
	}
	return []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(s)}
}

// toolInput is the raw argument text when it is a JSON object, the only
// input the API accepts; anything else (the model produced invalid JSON,
// which the tool already refused) is sent as {} so the turn stays valid.
func toolInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(args)
}

func tools(in []model.ToolSchema) ([]anthropic.ToolUnionParam, error) {
	if len(in) == 0 {
		return nil, nil // an empty "tools" list is refused by the APIs
	}
	out := make([]anthropic.ToolUnionParam, 0, len(in))
	for _, t := range in {
		// Properties is never nil: an all-zero schema would be left out of
		// the request, and input_schema is required.
		schema := anthropic.ToolInputSchemaParam{Properties: map[string]any{}}
		if len(t.Parameters) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(t.Parameters, &obj); err != nil || obj == nil {
				return nil, badRequest(fmt.Sprintf("tool %q: parameters are not a JSON object", t.Name))
			}
			// The SDK models properties and required; every other keyword
			// (additionalProperties, $defs, ...) travels as an extra field.
			if p, ok := obj["properties"]; ok && p != nil {
				schema.Properties = p
			}
			if req, ok := obj["required"].([]any); ok {
				for _, r := range req {
					if s, ok := r.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
			delete(obj, "type")
			delete(obj, "properties")
			delete(obj, "required")
			if len(obj) > 0 {
				schema.ExtraFields = obj
			}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = param.NewOpt(t.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return out, nil
}

// applyArgs maps model args onto the request:
//
//   - max_tokens (alias max_completion_tokens): an integer, default DefaultMaxTokens;
//   - temperature, top_p: numbers; top_k: an integer;
//   - stop or stop_sequences: a string or a list of strings;
//   - seed, frequency_penalty, presence_penalty: dropped (see droppedArgs);
//   - any other key is added to the request JSON as given (thinking,
//     metadata, service_tier, tool_choice, ...).
func applyArgs(p *anthropic.MessageNewParams, args model.Args) ([]string, error) {
	p.MaxTokens = DefaultMaxTokens
	extra := map[string]any{}
	var dropped []string
	for _, k := range args.Keys() {
		v := args[k]
		var err error
		switch {
		case reservedArgs[k]:
			return nil, badRequest(fmt.Sprintf("arg %q is set by formica, not by args", k))
		case droppedArgs[k]:
			dropped = append(dropped, k)
		case k == "max_tokens" || k == "max_completion_tokens":
			var n param.Opt[int64]
			if n, err = opt(args.Integer(k)); err == nil {
				if n.Value <= 0 {
					return nil, badRequest(fmt.Sprintf("arg %q: must be positive", k))
				}
				p.MaxTokens = n.Value
			}
		case k == "temperature":
			p.Temperature, err = opt(args.Number(k))
		case k == "top_p":
			p.TopP, err = opt(args.Number(k))
		case k == "top_k":
			p.TopK, err = opt(args.Integer(k))
		case k == "stop" || k == "stop_sequences":
			if p.StopSequences, err = args.Strings(k); err != nil {
				err = badRequest(err.Error())
			}
		default:
			extra[k] = v
		}
		if err != nil {
			return nil, err
		}
	}
	if len(extra) > 0 {
		p.SetExtraFields(extra)
	}
	return dropped, nil
}

// opt is an arg's value as the SDK's optional field, or its error as a bad request.
func opt[T comparable](v T, err error) (param.Opt[T], error) {
	if err != nil {
		return param.Opt[T]{}, badRequest(err.Error())
	}
	return param.NewOpt(v), nil
}

func badRequest(msg string) error {
	return fmt.Errorf("%s: %w: %s", provider, model.ErrBadRequest, msg)
}
