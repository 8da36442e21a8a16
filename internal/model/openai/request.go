package openai

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/formica-run/formica/internal/model"
)

// reservedArgs are request fields this package owns; an arg may not replace
// them (every request streams, and the usage comes from the final chunk
// that stream_options asks for).
var reservedArgs = map[string]bool{"model": true, "messages": true, "tools": true, "stream": true, "stream_options": true}

// params maps a model.Request onto the SDK's request. Errors wrap model.ErrBadRequest.
func (m *Model) params(req model.Request) (openai.ChatCompletionNewParams, error) {
	var p openai.ChatCompletionNewParams
	p.Model = cmp.Or(req.Model, m.model)
	if p.Model == "" {
		return p, badRequest("no model name in the request or the config")
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	if p.Tools, err = tools(req.Tools); err != nil {
		return p, err
	}
	if len(p.Tools) > 0 {
		p.ParallelToolCalls = param.NewOpt(req.ParallelToolCalls)
	}
	if req.CacheKey != "" {
		p.PromptCacheKey = param.NewOpt(req.CacheKey)
	}
	if err := m.applyArgs(&p, req.Args); err != nil {
		return p, err
	}
	// Without it the stream reports no usage at all.
	p.StreamOptions.IncludeUsage = param.NewOpt(true)
	return p, nil
}

// messages maps the conversation. Assistant tool calls keep their ids and raw
// argument text; tool results link to them by tool_call_id.
func messages(in []model.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(in))
	for i, msg := range in {
		switch msg.Role {
		case model.RoleSystem:
			out = append(out, openai.SystemMessage(msg.Content))
		case model.RoleUser:
			out = append(out, openai.UserMessage(msg.Content))
		case model.RoleAssistant:
			out = append(out, assistant(msg))
		case model.RoleTool:
			if msg.ToolCallID == "" {
				return nil, badRequest(fmt.Sprintf("message %d: tool result without a tool call id", i))
			}
			out = append(out, openai.ToolMessage(msg.Content, msg.ToolCallID))
		default:
			return nil, badRequest(fmt.Sprintf("message %d: unknown role %q", i, msg.Role))
		}
	}
	return out, nil
}

func assistant(msg model.Message) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	// Content may be null only when there are tool calls.
	if msg.Content != "" || len(msg.ToolCalls) == 0 {
		a.Content.OfString = param.NewOpt(msg.Content)
	}
	for _, tc := range msg.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      tc.Name,
					Arguments: tc.Arguments,
				},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// emptySchema is sent for a tool without parameters: some compatible servers
// reject a function without a parameters object.
var emptySchema = map[string]any{"type": "object", "properties": map[string]any{}}

func tools(in []model.ToolSchema) ([]openai.ChatCompletionToolUnionParam, error) {
	if len(in) == 0 {
		return nil, nil // an empty "tools" list is refused by the APIs
	}
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(in))
	for _, t := range in {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: emptySchema}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
				return nil, badRequest(fmt.Sprintf("tool %q: parameters are not a JSON object", t.Name))
			}
			fn.Parameters = schema
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out, nil
}

// applyArgs maps model args onto the request:
//
//   - temperature, top_p, frequency_penalty, presence_penalty: numbers;
//   - seed: an integer;
//   - stop: a string or a list of strings;
//   - max_tokens: sent as max_completion_tokens to OpenAI's own API (where
//     max_tokens is deprecated and refused by reasoning models) and as
//     max_tokens to every other server (many know only that);
//     max_completion_tokens is always sent as itself;
//   - prompt_cache_key: a string replaces the request's CacheKey; any other
//     value (false, null, "") sends none, for servers that refuse the field;
//   - any other key is added to the request JSON as given, so provider
//     features (reasoning_effort, response_format, ...) need no code here.
func (m *Model) applyArgs(p *openai.ChatCompletionNewParams, args model.Args) error {
	extra := map[string]any{}
	for _, k := range args.Keys() {
		v := args[k]
		if reservedArgs[k] {
			return badRequest(fmt.Sprintf("arg %q is set by formica, not by args", k))
		}
		var err error
		switch k {
		case "temperature":
			p.Temperature, err = opt(args.Number(k))
		case "top_p":
			p.TopP, err = opt(args.Number(k))
		case "frequency_penalty":
			p.FrequencyPenalty, err = opt(args.Number(k))
		case "presence_penalty":
			p.PresencePenalty, err = opt(args.Number(k))
		case "seed":
			p.Seed, err = opt(args.Integer(k))
		case "max_completion_tokens":
			p.MaxCompletionTokens, err = opt(args.Integer(k))
		case "max_tokens":
			if m.http.Official {
				p.MaxCompletionTokens, err = opt(args.Integer(k))
			} else {
				p.MaxTokens, err = opt(args.Integer(k))
			}
		case "stop":
			if s, ok := v.(string); ok {
				p.Stop.OfString = param.NewOpt(s)
			} else if p.Stop.OfStringArray, err = args.Strings(k); err != nil {
				err = badRequest(err.Error())
			}
		case "prompt_cache_key":
			p.PromptCacheKey = param.Opt[string]{}
			if s, ok := v.(string); ok && s != "" {
				p.PromptCacheKey = param.NewOpt(s)
			}
		default:
			extra[k] = v
		}
		if err != nil {
			return err
		}
	}
	if len(extra) > 0 {
		p.SetExtraFields(extra)
	}
	return nil
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
