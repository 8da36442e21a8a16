package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/wire"
)

// served fetches and decodes the OpenAPI document.
func served(t *testing.T) map[string]any {
	t.Helper()
	h := newHarness(t, Config{Token: testToken})
	r := h.do("GET", "/v1/openapi.json", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return doc
}

func TestOpenAPIListsEveryRoute(t *testing.T) {
	doc := served(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v", doc["openapi"])
	}
	var documented []string
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	var routes []string
	s, _ := New(Config{}, newFake())
	for _, rt := range s.routes() {
		routes = append(routes, rt.method+" "+rt.path)
	}
	slices.Sort(documented)
	slices.Sort(routes)
	if diff := cmp.Diff(routes, documented); diff != "" {
		t.Errorf("documented operations (-routes +documented):\n%s", diff)
	}
}

// TestOpenAPISchemasMatchTypes holds each schema's properties to the JSON
// fields of the Go type it describes.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	schemas := served(t)["components"].(map[string]any)["schemas"].(map[string]any)
	types := map[string]reflect.Type{
		"Run":                  reflect.TypeFor[record.Run](),
		"Thread":               reflect.TypeFor[record.Thread](),
		"Refusals":             reflect.TypeFor[record.Refusals](),
		"Totals":               reflect.TypeFor[record.Totals](),
		"Usage":                reflect.TypeFor[model.Usage](),
		"Event":                reflect.TypeFor[event.Event](),
		"Approval":             reflect.TypeFor[Approval](),
		"Worker":               reflect.TypeFor[wire.WorkerInfo](),
		"Assets":               reflect.TypeFor[wire.Assets](),
		"AssetKind":            reflect.TypeFor[wire.AssetKind](),
		"Error":                reflect.TypeFor[ErrorBody](),
		"Status":               reflect.TypeFor[Status](),
		"SubmitRequest":        reflect.TypeFor[SubmitBody](),
		"SubmitResponse":       reflect.TypeFor[SubmitResponse](),
		"CancelResponse":       reflect.TypeFor[CancelResponse](),
		"ThreadCancelResponse": reflect.TypeFor[ThreadCancelResponse](),
		"DecideRequest":        reflect.TypeFor[DecideBody](),
		"DecideResponse":       reflect.TypeFor[DecideResponse](),
		"AgentSpec":            reflect.TypeFor[spec.Agent](),
		"Budget":               reflect.TypeFor[BudgetBody](),
		"BudgetUse":            nil, // a map of limits.Amount by kind
		"ResumeResponse":       reflect.TypeFor[ResumeResponse](),
		"ThreadSummary":        reflect.TypeFor[ThreadSummary](),
		"Transcript":           reflect.TypeFor[Transcript](),
		"JournalEntry":         reflect.TypeFor[journal.Entry](),
		"Message":              reflect.TypeFor[model.Message](),
		"ToolCall":             reflect.TypeFor[model.ToolCall](),
		"Reasoning":            reflect.TypeFor[model.Reasoning](),
	}
	for name, typ := range types {
		if name == "BudgetUse" {
			continue
		}
		schema, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		var props []string
		for p := range schema["properties"].(map[string]any) {
			props = append(props, p)
		}
		want := jsonFields(typ)
		if name == "AgentSpec" {
			want = append(want, "agents") // a submission's spec file
		}
		slices.Sort(props)
		slices.Sort(want)
		if diff := cmp.Diff(want, props); diff != "" {
			t.Errorf("schema %s (-Go fields +schema):\n%s", name, diff)
		}
	}
	for name := range schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("schema %s is not checked against a type", name)
		}
	}
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// TestOpenAPIRefsResolve: every $ref names something in the document.
func TestOpenAPIRefsResolve(t *testing.T) {
	doc := served(t)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var at any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := at.(map[string]any)
					at = m[part]
				}
				if at == nil {
					t.Errorf("dangling $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

// TestOpenAPIForClients: what generated clients and linters need: a
// server, the spec's free-form sections typed as maps of anything (not as
// empty objects, which generated clients type as having no key at all),
// and the 403 every changing request may get.
func TestOpenAPIForClients(t *testing.T) {
	doc := served(t)
	if servers, _ := doc["servers"].([]any); len(servers) == 0 {
		t.Error("no servers")
	}
	props := doc["components"].(map[string]any)["schemas"].(map[string]any)["AgentSpec"].(map[string]any)["properties"].(map[string]any)
	for _, name := range []string{"model_args", "output_schema", "harness", "helper", "budget"} {
		p, _ := props[name].(map[string]any)
		if p["type"] != "object" || p["additionalProperties"] != true {
			t.Errorf("AgentSpec.%s = %v; want an object with additionalProperties: true", name, p)
		}
	}
	for path, item := range doc["paths"].(map[string]any) {
		post, ok := item.(map[string]any)["post"].(map[string]any)
		if !ok {
			continue
		}
		if _, ok := post["responses"].(map[string]any)["403"]; !ok {
			t.Errorf("POST %s documents no 403", path)
		}
	}
}
