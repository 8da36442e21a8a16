package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// named is a tool distinguishable by origin, so tests can see which of two
// same-named tools won a merge.
type named struct{ name, origin string }

func (n named) Name() string                                         { return n.name }
func (n named) Description() string                                  { return n.origin }
func (n named) Schema() json.RawMessage                              { return json.RawMessage(`{"type":"object"}`) }
func (n named) Run(context.Context, json.RawMessage) (string, error) { return n.origin, nil }

func toolList(origin string, names ...string) []Tool {
	out := make([]Tool, len(names))
	for i, n := range names {
		out[i] = named{n, origin}
	}
	return out
}

// describe lists name@origin so both the set and who won are compared.
func describe(ts []Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name() + "@" + t.Description()
	}
	return out
}

func TestShimMergeEachNameOnceDirectWins(t *testing.T) {
	direct := toolList("D", "agent", "read_file")
	shims := toolList("S", "read_file", "bash", "read_file")
	got := Merge(direct, shims)
	want := []string{"agent@D", "read_file@D", "bash@S"}
	if d := cmp.Diff(want, describe(got)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
