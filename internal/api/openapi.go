package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"sync"
)

// The OpenAPI 3.1 document of the API, written as a Go value. Tests hold it
// to the routes (every route documented, nothing else) and to the Go types
// (every schema's properties are the type's JSON fields).

type obj = map[string]any

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIJSON())
	return nil
}

// openAPIJSON is the document, encoded once.
var openAPIJSON = sync.OnceValue(func() []byte {
	b, err := json.MarshalIndent(openAPIDoc(), "", "  ")
	if err != nil {
		panic(err) // a static document; the tests encode it
	}
	return append(b, '\n')
})

func ref(name string) obj   { return obj{"$ref": "#/components/schemas/" + name} }
func arrayOf(items obj) obj { return obj{"type": "array", "items": items} }

func typ(t string, desc string) obj {
	o := obj{"type": t}
	if desc != "" {
		o["description"] = desc
	}
	return o
}

// freeObject is an object whose keys the document does not list (a
// provider's parameters, a JSON Schema, a spec's nested sections): any
// key, any value, so generated clients type it as a map of anything.
func freeObject(desc string) obj {
	return with(typ("object", desc), "additionalProperties", true)
}

func timeProp(desc string) obj { return with(typ("string", desc), "format", "date-time") }

func object(required []string, props obj) obj {
	o := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// strictObject is a request body: unknown fields are refused.
func strictObject(required []string, props obj) obj {
	o := object(required, props)
	o["additionalProperties"] = false
	return o
}

func jsonContent(schema obj) obj { return obj{"application/json": obj{"schema": schema}} }

func response(desc string, schema obj) obj {
	return obj{"description": desc, "content": jsonContent(schema)}
}

func errResponse(name string) obj { return obj{"$ref": "#/components/responses/" + name} }

// op is one operation; its error responses are named by status.
func op(id, summary string, ok string, okResp obj, errs ...string) obj {
	responses := obj{ok: okResp}
	for _, e := range errs {
		responses[e] = errResponse(errorResponses[e])
	}
	return obj{"operationId": id, "summary": summary, "responses": responses}
}

var errorResponses = map[string]string{"400": "BadRequest", "401": "Unauthorized", "403": "Forbidden", "404": "NotFound",
	"405": "MethodNotAllowed", "409": "Conflict", "413": "TooLarge", "500": "Internal", "503": "Unavailable"}

func param(name, in, desc string, schema obj, required bool) obj {
	return obj{"name": name, "in": in, "description": desc, "schema": schema, "required": required}
}

var (
	runStatus    = obj{"type": "string", "enum": runStatuses}
	threadStatus = obj{"type": "string", "enum": []string{"pending", "waiting", "running", "succeeded", "failed", "cancelled"}}
	eventStatus  = obj{"type": "string", "enum": []string{"succeeded", "failed", "cancelled"}, "description": "The final status (thread.finished, run.finished)."}
	runIDParam   = param("id", "path", "The run id.", obj{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, true)
)

// withResponse returns a copy of operation o with one more response.
func withResponse(o obj, status string, resp obj) obj {
	o = maps.Clone(o)
	responses := maps.Clone(o["responses"].(obj))
	responses[status] = resp
	o["responses"] = responses
	return o
}

// with returns a copy of o with more keys.
func with(o obj, kv ...any) obj {
	o = maps.Clone(o)
	for i := 0; i+1 < len(kv); i += 2 {
		o[kv[i].(string)] = kv[i+1]
	}
	return o
}

func openAPIDoc() obj {
	errorStatus := map[string]string{"BadRequest": "The request is malformed.", "Unauthorized": "A bearer token is missing or wrong.",
		"NotFound": "No such resource.", "Conflict": "The request clashes with the current state: a run id already taken by another run, " +
			"a run that cannot be cancelled or resumed now, an approval already answered.",
		"Forbidden": "Refused: without a token, a request addressed to a host other than localhost, 127.0.0.0/8 or ::1; " +
			"a changing request from another origin's web page, or a browser session's without its CSRF value (X-CSRF-Token).",
		"TooLarge": "The body is larger than the server's limit.", "Internal": "A fault of the server's.",
		"Unavailable": "The backend (NATS, JetStream) cannot serve now."}
	responses := obj{}
	for name, desc := range errorStatus {
		responses[name] = response(desc, ref("Error"))
	}
	responses["MethodNotAllowed"] = with(response("The path does not take this method; `Allow` names the methods it takes.", ref("Error")),
		"headers", obj{"Allow": obj{"description": "The methods the path takes.", "schema": obj{"type": "string"}}})
	paths := openAPIPaths()
	// Statuses every operation may answer, whatever it does: 403, because
	// without a token only requests addressed to a loopback host are served
	// (and a changing request may be refused as cross-origin or, from a
	// browser session, without its CSRF value); 405, because the server
	// answers its paths' other methods in JSON, and a client generated from
	// the document should know that body.
	for _, item := range paths {
		for method, o := range item.(obj) {
			if method == "parameters" {
				continue
			}
			rs := o.(obj)["responses"].(obj)
			rs["403"] = errResponse("Forbidden")
			rs["405"] = errResponse("MethodNotAllowed")
		}
	}
	return obj{
		"openapi": "3.1.0",
		"servers": []obj{{"url": "http://127.0.0.1:8080", "description": "A coordinator's API at its default --http address."}},
		"info": obj{"title": "Formica coordinator API", "version": "1",
			"description": "Submit, follow, cancel and resume agent runs, read their threads' transcripts, answer approvals and list workers. " +
				"With a token configured, every operation but the probes needs `Authorization: Bearer <token>`."},
		"security": []obj{{"bearer": []string{}}},
		"paths":    paths,
		"components": obj{
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer"}},
			"responses":       responses,
			"schemas":         openAPISchemas(),
		},
	}
}

func openAPIPaths() obj {
	noAuth := []obj{}
	return obj{
		"/v1/runs": obj{
			"post": with(op("submitRun", "Submit a run", "202", response("The run is queued. Submitting the same id again returns the same run.", ref("SubmitResponse")),
				"400", "401", "409", "413", "500", "503"),
				"requestBody", obj{"required": true, "content": jsonContent(ref("SubmitRequest"))}),
			"get": with(op("listRuns", "List runs, newest first", "200", response("Run records.", arrayOf(ref("Run"))), "400", "401", "500", "503"),
				"parameters", []obj{
					param("status", "query", "Only runs with this status.", runStatus, false),
					param("limit", "query", "How many runs at most; larger values count as 1000.",
						obj{"type": "integer", "minimum": 1, "default": defaultListLimit}, false),
				}),
		},
		"/v1/runs/{id}": obj{
			"parameters": []obj{runIDParam},
			"get":        op("getRun", "Get a run's record", "200", response("The run record.", ref("Run")), "401", "404", "500", "503"),
		},
		"/v1/runs/{id}/events": obj{
			"parameters": []obj{runIDParam},
			"get": with(withResponse(withResponse(op("runEvents", "Follow a run's events (Server-Sent Events)", "200", obj{
				"description": "An event stream. Each message is `id: <event id>` (its stored batch's sequence × 1000 + its place in the batch), " +
					"`event: <the Event's type>` (so an EventSource listens with addEventListener('run.finished', ...)) and `data: <Event as one line of JSON>`; " +
					"`: keepalive` comments come while nothing else does. It replays the stored events after the resume point, " +
					"follows live ones and ends when the run has finished.",
				// x-event-data names the schema of each message's data: a
				// typed client parses it as components.schemas.Event.
				"content": obj{"text/event-stream": obj{"schema": obj{"type": "string"}, "x-event-data": ref("Event")}},
			}, "400", "401", "404", "500"), "204", obj{
				"description": "The run has finished and has no event after the resume point: nothing to stream (an EventSource stops reconnecting).",
			}), "503", obj{
				"description": "The backend cannot serve now, or the server already serves its most event streams at once (coordinator `--http-max-streams`): try again after `Retry-After`.",
				"headers": obj{"Retry-After": obj{"description": "Seconds to wait before trying again (set when the server is at its most streams).",
					"schema": obj{"type": "integer", "minimum": 0}}},
				"content": jsonContent(ref("Error")),
			}),
				"parameters", []obj{
					param("Last-Event-ID", "header", "Resume after this event id (wins over `after`).", obj{"type": "integer", "minimum": 0}, false),
					param("after", "query", "Resume after this event id.", obj{"type": "integer", "minimum": 0}, false),
				}),
		},
		"/v1/runs/{id}/cancel": obj{
			"parameters": []obj{runIDParam},
			"post": op("cancelRun", "Cancel a run and its whole tree", "202", response("Cancelling.", ref("CancelResponse")),
				"401", "404", "409", "500", "503"),
		},
		"/v1/runs/{id}/threads/{thread}/cancel": obj{
			"parameters": []obj{runIDParam, param("thread", "path", "The thread id.", obj{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, true)},
			"post": op("cancelThread", "Cancel one thread and its subtree; its parent sees the helper fail and goes on", "202",
				response("Cancelling.", ref("ThreadCancelResponse")), "401", "404", "409", "500", "503"),
		},
		"/v1/runs/{id}/resume": obj{
			"parameters": []obj{runIDParam},
			"post": op("resumeRun", "Run a failed or cancelled run again, reusing its finished work", "202",
				response("Queued again under the same id; finished threads are reused from the journal.", ref("ResumeResponse")),
				"401", "404", "409", "500", "503"),
		},
		"/v1/runs/{id}/threads": obj{
			"parameters": []obj{runIDParam},
			"get": op("listThreads", "List a run's threads, from its journal", "200",
				response("Root first, then in the order they started.", arrayOf(ref("ThreadSummary"))), "401", "404", "500", "503"),
		},
		"/v1/runs/{id}/threads/{thread}": obj{
			"parameters": []obj{runIDParam, param("thread", "path", "The thread id.", obj{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}, true)},
			"get": op("getThread", "A thread's transcript, from its journal", "200", response("The transcript.", ref("Transcript")),
				"401", "404", "500", "503"),
		},
		"/v1/approvals": obj{
			"get": op("listApprovals", "List pending approvals", "200", response("Pending approvals.", arrayOf(ref("Approval"))), "401", "500", "503"),
		},
		"/v1/approvals/{id}": obj{
			"parameters": []obj{param("id", "path", "The approval id.", obj{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$"}, true)},
			"post": with(op("decideApproval", "Allow or deny a pending tool call", "200", response("Decided.", ref("DecideResponse")),
				"400", "401", "404", "409", "413", "500", "503"),
				"requestBody", obj{"required": true, "content": jsonContent(ref("DecideRequest"))}),
		},
		"/v1/workers": obj{
			"get": op("listWorkers", "List live workers", "200", response("Workers.", arrayOf(ref("Worker"))), "401", "500", "503"),
		},
		"/v1/assets": obj{
			"get": op("countAssets", "Count the cluster's JetStream streams and consumers by kind", "200",
				response("A coordinator's count, made now.", ref("Assets")), "401", "500", "503"),
		},
		"/v1/openapi.json": obj{
			"get": op("openAPI", "This document", "200", response("The OpenAPI document.", obj{"type": "object"}), "401"),
		},
		"/healthz": obj{
			"get": with(op("healthz", "Liveness: the process is up", "200", response("Alive.", ref("Status"))), "security", noAuth),
		},
		"/metrics": obj{
			"get": op("metrics", "Prometheus metrics (text exposition format)", "200",
				obj{"description": "The metrics.", "content": obj{"text/plain": obj{"schema": obj{"type": "string"}}}}, "401", "404"),
		},
		"/readyz": obj{
			"get": with(op("readyz", "Readiness: NATS and JetStream are usable and, on a coordinator without local workers, a worker is registered", "200", response("Ready.", ref("Status")), "503"),
				"security", noAuth),
		},
	}
}

func openAPISchemas() obj {
	usage := ref("Usage")
	nullable := func(t string) []string { return []string{t, "null"} }
	return obj{
		"Error": object([]string{"error"}, obj{"error": object([]string{"code", "message"}, obj{
			"code":    obj{"type": "string", "enum": errorCodes},
			"message": typ("string", "What went wrong, for people."),
		})}),
		"Status": object([]string{"status"}, obj{"status": typ("string", `"ok" or "ready"`),
			"workers": typ("integer", "On /readyz: the live workers the coordinator knows.")}),
		"SubmitRequest": strictObject([]string{"task"}, obj{
			"task":  with(typ("string", "The root agent's task."), "minLength", 1),
			"model": typ("string", `A model reference overriding the agent's, such as "openai:gpt-4o" or "sim".`),
			"agent": obj{"oneOf": []obj{ref("AgentSpec"), typ("string", "An agent spec file's text, YAML or JSON.")},
				"description": "The root agent (and, under `agents`, its handoff targets): a spec as JSON, or a spec file's text."},
			"id":                with(typ("string", "The run id to use; the same id twice is the same run."), "pattern", "^[A-Za-z0-9_-]{1,64}$"),
			"agent_max_depth":   with(typ("integer", "Deepest helper allowed; 0 is the default (4)."), "minimum", 0),
			"agent_max_threads": with(typ("integer", "Live helpers allowed at once; 0 is the default (16). At most the coordinator's --max-agent-threads."), "minimum", 0),
			"budget":            ref("Budget"),
			"timeout":           typ("string", `The run's deadline once started, a Go duration such as "30m"; default the coordinator's --run-timeout, at most its --max-run-timeout.`),
			"webhooks": with(obj{"type": "array", "items": with(typ("string", "An http or https URL."), "format", "uri"),
				"description": "URLs to call, signed (Standard Webhooks), when the run ends; each under a prefix the coordinator allows (--webhook-allow), or the submission is refused."},
				"maxItems", 8),
		}),
		"Budget": strictObject(nil, obj{
			"tokens":        with(typ("integer", "Input plus output tokens of the whole tree."), "minimum", 0),
			"input_tokens":  with(typ("integer", "Input tokens of the whole tree."), "minimum", 0),
			"output_tokens": with(typ("integer", "Output tokens of the whole tree."), "minimum", 0),
			"duration":      typ("string", `Wall time since the run started, a Go duration such as "10m".`),
			"spawns":        with(typ("integer", "Helpers ever started in the tree; at most the coordinator's --max-spawns."), "minimum", 0),
			"usd":           with(typ("number", "US dollars the whole tree's model calls may cost, at the workers' prices; each call's estimated cost is reserved before it is sent."), "minimum", 0),
		}),
		"BudgetUse": obj{"type": "object", "description": "Per bounded kind (tokens, input_tokens, output_tokens, duration in milliseconds, spawns, usd in US dollars): used and limit.",
			"additionalProperties": object([]string{"used", "limit"}, obj{"used": typ("number", ""), "limit": typ("number", "")})},
		"SubmitResponse": object([]string{"run_id"}, obj{"run_id": typ("string", "")}),
		"CancelResponse": object([]string{"run_id", "status"}, obj{"run_id": typ("string", ""), "status": obj{"const": "cancelling"}}),
		"ThreadCancelResponse": object([]string{"run_id", "thread_id", "status"}, obj{"run_id": typ("string", ""), "thread_id": typ("string", ""),
			"status": obj{"const": "cancelling"}}),
		"DecideRequest":  strictObject([]string{"decision"}, obj{"decision": obj{"type": "string", "enum": []string{"allow", "deny"}}}),
		"DecideResponse": object([]string{"id", "decision"}, obj{"id": typ("string", ""), "decision": obj{"type": "string", "enum": []string{"allow", "deny"}}}),
		"AgentSpec": with(object([]string{"name"}, obj{
			"name":                typ("string", "One word: letters, digits, '-', '_', '.'; 1 to 64 characters."),
			"instructions":        typ("string", "The system prompt."),
			"model":               typ("string", "A model reference."),
			"model_args":          freeObject("Provider parameters such as temperature."),
			"tools":               arrayOf(typ("string", "")),
			"parallel_tool_calls": typ("boolean", "Run one response's tool calls at once; default true."),
			"max_turns":           with(typ("integer", "Model calls allowed; 0 is the default (50)."), "minimum", 0),
			"context_window": typ("integer", "The model's context window in tokens (0, or at least 1024); 0 takes the model's from the built-in table. "+
				"Past 80% of it the thread elides old tool results, then summarizes its oldest turns."),
			"output_schema": freeObject("A JSON Schema the final answer must satisfy."),
			"handoffs":      arrayOf(typ("string", "")),
			"harness": freeObject("cwd, tools and permissions of the base tools; at_most_once, the tools (name globs) whose calls must not run twice, " +
				"and in_doubt (report or ask), what becomes of such a call a failure cut before its result."),
			"helper": freeObject("The `agent` tool's template for helpers; its `budget` bounds each helper's subtree, its `context_window` each helper's window."),
			"budget": freeObject("The run's budget when this is the root agent: tokens, input_tokens, output_tokens, duration, spawns, usd."),
			"agents": arrayOf(ref("AgentSpec")),
		}), "description", "An agent spec file as JSON, checked like a spec file (unknown keys are errors). "+
			"`agents`, only in a submission, lists the agents it may hand off to."),
		"Usage": object(nil, obj{
			"input_tokens":       typ("integer", "Every input token the provider read, cached or not."),
			"output_tokens":      typ("integer", ""),
			"cache_read_tokens":  typ("integer", "The part of input_tokens read from the provider's prompt cache."),
			"cache_write_tokens": typ("integer", "The part of input_tokens written to the provider's prompt cache, where the provider reports it."),
			"cost_usd":           typ("number", "What the priced calls cost in US dollars, at the workers' prices."),
			"priced_calls":       typ("integer", "The calls cost_usd sums."),
			"unpriced_calls":     typ("integer", "Calls of a model with no price: when any, the cost is unknown."),
		}),
		"Refusals": object(nil, obj{"depth": typ("integer", "Spawns refused by the depth limit."),
			"threads": typ("integer", "Spawns refused by the thread limit."),
			"budget":  typ("integer", "Spawns refused because a budget was spent.")}),
		"Totals": object([]string{"done", "running", "waiting", "failed", "cancelled", "refused", "input_tokens", "output_tokens"}, obj{
			"done": typ("integer", "Threads that succeeded."), "running": typ("integer", "Threads running (or not yet ended)."),
			"waiting": typ("integer", "Threads waiting for a worker slot."), "failed": typ("integer", "Threads that failed."),
			"cancelled": typ("integer", "Threads cancelled."), "refused": typ("integer", "Spawns refused by the depth, thread and budget limits together."),
			"input_tokens":       typ("integer", "The run's input tokens (its own count once final, else its threads' sum)."),
			"output_tokens":      typ("integer", "The run's output tokens, likewise."),
			"cache_read_tokens":  typ("integer", "The part of input_tokens read from the providers' prompt caches, likewise."),
			"cache_write_tokens": typ("integer", "The part of input_tokens written to the providers' prompt caches, likewise."),
			"cost_usd":           obj{"type": nullable("number"), "description": "What the run cost in US dollars, likewise; null when a model of it has no price."},
			"in_doubt":           typ("integer", "The tree's calls in doubt (Thread.in_doubt)."),
		}),
		"Thread": object([]string{"id", "status"}, obj{
			"id": typ("string", ""), "parent_id": typ("string", ""), "name": typ("string", ""), "depth": typ("integer", ""),
			"status": threadStatus, "worker": typ("string", ""), "error": typ("string", ""),
			"waiting":  typ("string", "Why a waiting thread has not started: waiting for a worker."),
			"usage":    obj{"$ref": "#/components/schemas/Usage", "description": "The thread's own model calls, not its helpers'; the run's usage is the whole tree's."},
			"cost_usd": obj{"type": nullable("number"), "description": "What the thread's own model calls cost in US dollars; null when one was of a model with no price."},
			"reused":   typ("boolean", "It had finished in an earlier execution of the run; its output came from its journal."),
			"in_doubt": typ("integer", "Its calls of at-most-once tools that a failure cut before their result and that were not run again: "+
				"each may or may not have taken effect."),
			"started_at": timeProp(""), "finished_at": timeProp(""),
		}),
		"ResumeResponse": object([]string{"run_id", "status"}, obj{"run_id": typ("string", ""), "status": obj{"const": "queued"}}),
		"ThreadSummary": object([]string{"id", "name", "path", "depth", "status"}, obj{
			"id": typ("string", ""), "parent_id": typ("string", ""), "name": typ("string", ""),
			"path":  typ("string", "Names from the root down, such as formica/research/outline."),
			"depth": typ("integer", ""), "status": threadStatus, "error": typ("string", ""),
			"worker":   typ("string", "Where it was placed last."),
			"attempts": typ("integer", "Its placements that journaled something."), "usage": usage,
			"started_at": timeProp(""), "finished_at": timeProp(""),
		}),
		"Message": object([]string{"role"}, obj{
			"role":    obj{"type": "string", "enum": []string{"system", "user", "assistant", "tool"}},
			"content": typ("string", ""), "tool_calls": arrayOf(ref("ToolCall")),
			"tool_call_id": typ("string", "The call a tool message answers."), "tool_name": typ("string", ""),
			"reasoning": with(arrayOf(ref("Reasoning")), "description", "The provider's reasoning blocks of an assistant message, sent back with it."),
		}),
		"Reasoning": object(nil, obj{
			"text": typ("string", ""), "signature": typ("string", "The provider's signature of the block."),
			"redacted": typ("string", "The opaque data of a redacted block."),
		}),
		"ToolCall": object([]string{"id", "name", "arguments"}, obj{
			"id": typ("string", ""), "name": typ("string", ""), "arguments": typ("string", "The JSON text the model produced."),
		}),
		"Transcript": object([]string{"run_id", "thread_id", "name", "path", "depth", "status", "usage", "messages", "entries"}, obj{
			"run_id": typ("string", ""), "thread_id": typ("string", ""), "parent_id": typ("string", ""), "name": typ("string", ""),
			"path": typ("string", ""), "depth": typ("integer", ""), "model": typ("string", ""), "status": threadStatus,
			"output": typ("string", ""), "error": typ("string", ""), "worker": typ("string", ""),
			"attempts": typ("integer", ""), "usage": usage, "started_at": timeProp(""), "finished_at": timeProp(""),
			"in_doubt": typ("integer", "Its calls found in doubt (entries with tool_status in_doubt)."),
			"messages": with(arrayOf(ref("Message")), "description", "The conversation exactly as the model saw it: system prompt, task, "+
				"each assistant message followed by its tool results in call order."),
			"entries": with(arrayOf(ref("JournalEntry")), "description", "The journal, in the order it was written."),
		}),
		"JournalEntry": object([]string{"kind", "time", "turn", "seq"}, obj{
			"kind": obj{"type": "string", "enum": []string{"start", "model", "tool", "approval", "correction", "handoff", "end",
				"placement", "spawn", "refusal", "elision", "summary"}},
			"time": timeProp(""), "turn": typ("integer", "The model call the entry belongs to, from 0."),
			"seq":    typ("integer", "Its sequence in the journal stream."),
			"thread": obj{"type": "object", "description": "start: id, parent_id, name, path, depth."},
			"system": typ("string", "start, handoff: the system prompt."), "task": typ("string", ""),
			"spec": ref("AgentSpec"), "model": typ("string", ""),
			"message": ref("Message"), "usage": usage, "latency_ms": typ("integer", ""),
			"call_id": typ("string", ""), "tool": typ("string", ""), "arguments": typ("string", ""),
			"result": typ("string", "tool: what the model was given."),
			"tool_status": obj{"type": "string", "enum": []string{"ok", "error", "denied", "helper_failed", "not_run", "started", "in_doubt"},
				"description": "started: a call of an at-most-once tool about to run (its result is another entry); in_doubt: one a failure cut, not run again."},
			"duration_ms": typ("integer", ""), "allow": typ("boolean", "approval: the decision."), "reason": typ("string", ""),
			"in_doubt": typ("boolean", "approval: a decision on a call in doubt (allow ran it again)."),
			"child_id": typ("string", "spawn: the helper's thread id."), "name": typ("string", "spawn, refusal: the helper's name."),
			"content": typ("string", "correction: the message asking for output that fits the schema; summary: the summary."),
			"elided": with(arrayOf(object([]string{"index", "call_id", "tool", "bytes"}, obj{
				"index":   typ("integer", "The result's place in the conversation (0 is the system prompt, 1 the task)."),
				"call_id": typ("string", ""), "tool": typ("string", ""), "bytes": typ("integer", "The size of the result replaced."),
			})), "description", "elision: the old tool results replaced by markers to fit the context window."),
			"summarized":     typ("integer", "summary: how many messages after the task the summary replaced."),
			"context_window": typ("integer", "elision, summary: the model's context window in tokens."),
			"tokens_before":  typ("integer", "elision, summary: the request's estimated tokens before."),
			"tokens_after":   typ("integer", "elision, summary: the request's estimated tokens after."),
			"target":         typ("string", "handoff: the agent that carries on."),
			"status":         eventStatus, "output": typ("string", ""), "error": typ("string", ""),
			"own": ref("Usage"), "worker": typ("string", "placement: where."), "attempt": typ("integer", "placement: which."),
		}),
		"Run": object([]string{"run_id", "status"}, obj{
			"run_id": typ("string", ""), "status": runStatus, "output": typ("string", ""), "error": typ("string", ""),
			"threads":  obj{"type": nullable("array"), "items": ref("Thread"), "description": "Root first, then in tree order."},
			"refusals": ref("Refusals"), "usage": usage, "budget": ref("BudgetUse"), "task": typ("string", ""), "spec": ref("AgentSpec"),
			"cost_usd": obj{"type": nullable("number"), "description": "What the whole tree's model calls cost in US dollars, once the run has ended; " +
				"null while it runs and when a model of it has no price."},
			"agents": obj{"type": "object", "additionalProperties": ref("AgentSpec")}, "model": typ("string", ""),
			"agent_max_depth":   typ("integer", "The depth limit it was submitted with; absent: the default (4)."),
			"agent_max_threads": typ("integer", "The thread limit it was submitted with; absent: the default (16)."),
			"attempts":          typ("integer", "How often a coordinator started the run."),
			"resumes":           typ("integer", "How often the run was resumed."),
			"cwd":               typ("string", "The harness directory on the workers."),
			"submitted_budget": obj{"type": "object", "description": "The budget it was submitted with (the spec's, with the submission's amounts over it), " +
				"kept so a resume runs under it: tokens, input_tokens, output_tokens, spawns, duration in nanoseconds."},
			"timeout_ns":       typ("integer", "The deadline it was submitted with, in nanoseconds; a resume keeps it."),
			"webhooks":         obj{"type": "array", "items": obj{"type": "string"}, "description": "The webhook URLs it was submitted with; a resume calls them too."},
			"cancel_requested": typ("string", "A cancel sent while the run ran; honoured even if its coordinator died."),
			"trace_id":         typ("string", "The run's OpenTelemetry trace id, when it was traced."),
			"trace_url":        typ("string", "A link to the trace, from the coordinator's --trace-url template."),
			"totals":           ref("Totals"),
			"coordinator":      typ("string", ""), "created_at": timeProp(""), "started_at": timeProp(""), "finished_at": timeProp(""),
		}),
		"Event": object([]string{"type", "time", "run_id"}, obj{
			"type": typ("string", "run.queued, run.started, run.finished, thread.spawned, thread.refused, thread.waiting, thread.started, "+
				"thread.finished, thread.handoff, model.call, model.waiting, tool.call, tool.result, approval.requested, approval.resolved, "+
				"worker.joined, worker.lost, webhook.delivered or webhook.failed"),
			"time": timeProp(""), "run_id": typ("string", ""), "thread_id": typ("string", ""), "parent_id": typ("string", ""),
			"depth": typ("integer", ""), "name": typ("string", ""), "status": eventStatus, "reason": typ("string", ""),
			"worker": typ("string", ""), "model": typ("string", ""),
			"endpoint":   typ("string", "model.waiting: the model endpoint whose quota the call waits for."),
			"usage":      obj{"$ref": "#/components/schemas/Usage", "description": "model.call: that call's; thread.finished: the thread's own calls; run.finished: the whole run's."},
			"latency_ms": typ("integer", "Milliseconds, an integer: a model call's latency (model.call), a thread's time from start to end (thread.finished)."),
			"tool":       typ("string", ""), "call_id": typ("string", ""), "arguments": typ("string", ""), "output": typ("string", ""),
			"decision": obj{"type": "string", "enum": []string{"allow", "deny"}},
			"in_doubt": typ("boolean", "tool.result: a call of an at-most-once tool a failure cut before its result, not run again; "+
				"approval.requested: asks whether to run such a call again."),
			"url":         typ("string", "webhook.*: where the call went (scheme, host and path)."),
			"attempt":     typ("integer", "webhook.*: the message's calls so far, this one included."),
			"status_code": typ("integer", "webhook.*: the receiver's HTTP status; absent when none came."),
		}),
		"Approval": object([]string{"id", "run_id", "thread_id", "thread_path", "tool", "arguments", "requested_at"}, obj{
			"id": typ("string", ""), "run_id": typ("string", ""), "thread_id": typ("string", ""),
			"thread_path": typ("string", "The names from the root down to the asking thread (formica/name/...)."), "tool": typ("string", ""),
			"arguments": typ("string", "The call's exact arguments, as JSON text."), "requested_at": timeProp(""),
			"in_doubt": typ("boolean", "Asks whether to run again a call a failure cut before its result (it may or may not have taken effect): "+
				"allow runs it again, deny tells the agent it is in doubt."),
		}),
		"Worker": object([]string{"id"}, obj{
			"id": typ("string", ""), "host": typ("string", ""), "slots": typ("integer", "Threads it hosts at once."),
			"running": typ("integer", ""), "parked": typ("integer", "Threads waiting on helpers."),
			"placed":   typ("integer", "Threads this coordinator placed there that hold a slot."),
			"draining": typ("boolean", ""), "last_seen": timeProp("Its last heartbeat."),
			"sandbox": typ("string", "on: its tool calls run in the sandbox; off: it was started with --sandbox off."),
			"mcp": obj{"type": "array", "items": obj{"type": "string"},
				"description": "The MCP servers configured on it (--mcp-config); threads naming them in harness.mcp are placed there."},
		}),
		"Assets": object([]string{"streams", "consumers", "kinds", "counted_at"}, obj{
			"streams":    typ("integer", "Streams of the cluster's account, Formica's and any other."),
			"consumers":  typ("integer", "Their consumers."),
			"kinds":      arrayOf(ref("AssetKind")),
			"counted_at": timeProp("When the coordinator listed the streams."),
		}),
		"AssetKind": object([]string{"kind", "streams", "consumers"}, obj{
			"kind": obj{"type": "string", "enum": []string{"queue", "events", "index", "journal", "cancels", "transfers", "webhooks",
				"kv_runs", "kv_approvals", "kv_leases", "kv_keys", "obj_payloads", "legacy_transfers", "other"},
				"description": "What the streams are, from their names: Formica's own, the transfers buckets of an earlier version, or other."},
			"streams":   typ("integer", ""),
			"consumers": typ("integer", "Consumers of the kind's streams."),
			"names": obj{"type": "array", "items": obj{"type": "string"},
				"description": "The kind's streams, sorted, the first 100."},
		}),
	}
}
