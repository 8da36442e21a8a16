package spec

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// aliasBomb is a spec of a few hundred bytes whose output_schema, aliases
// expanded, has 10^levels strings: before Parse bounded expansion, six
// levels made it allocate over 4 GiB writing the schema out as JSON.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("name: x\noutput_schema:\n  type: object\n  l0: &l0 [")
	b.WriteString(strings.Repeat(`"aaaaaaaaaaaaaaaa",`, 9) + `"aaaaaaaaaaaaaaaa"]` + "\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s*l%d]\n", i, i, strings.Repeat(fmt.Sprintf("*l%d,", i-1), 9), i-1)
	}
	return b.String()
}

// allocated is what f allocates, the fewest bytes over three rounds (other
// goroutines of the test binary may allocate meanwhile).
func allocated(f func()) uint64 {
	least := ^uint64(0)
	for range 3 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		least = min(least, b.TotalAlloc-a.TotalAlloc)
	}
	return least
}

// TestBombsAreRefusedCheaply feeds Parse an alias bomb, a nesting bomb and
// an oversized document: each is refused, naming the bound, for at most a
// small multiple of its own size in allocations.
func TestBombsAreRefusedCheaply(t *testing.T) {
	deep := "name: x\nmodel_args: {a: " + strings.Repeat("[", MaxDepth+10) + strings.Repeat("]", MaxDepth+10) + "}\n"
	big := "name: x\ninstructions: " + strings.Repeat("a", MaxBytes) + "\n"
	for _, c := range []struct {
		name, doc, want string
		perByte         uint64
	}{
		{"aliases", aliasBomb(6), fmt.Sprintf("more than %d nodes with its aliases expanded", MaxNodes), 1000},
		{"nesting", deep, fmt.Sprintf("nested deeper than %d levels", MaxDepth), 1000},
		{"size", big, fmt.Sprintf("is more than a spec may have (%d)", MaxBytes), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			cost := allocated(func() { _, err = Parse([]byte(c.doc), "bomb.yaml") })
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v, want an error with %q", err, c.want)
			}
			if c.perByte > 0 && cost > c.perByte*uint64(len(c.doc))+64<<10 {
				t.Fatalf("refusing %d bytes allocated %d bytes (%d per byte)", len(c.doc), cost, cost/uint64(len(c.doc)))
			}
			t.Logf("%d bytes refused for %d bytes allocated", len(c.doc), cost)
		})
	}
}

// TestAliasesWithinBoundsParse: a spec that reuses a block through anchors,
// as people write them, still parses, its schema written out in full.
func TestAliasesWithinBoundsParse(t *testing.T) {
	doc := "name: x\noutput_schema:\n  type: object\n  properties:\n    a: &s {type: string, maxLength: 10}\n    b: *s\n    c: {<<: *s, minLength: 1}\n" +
		"agents:\n  - &agent {name: y, model_args: {temperature: 0.5}}\n  - {<<: *agent, name: z}\n"
	f, err := Parse([]byte(doc), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.OutputSchema); !strings.Contains(got, `"b":{"type":"string","maxLength":10}`) || !strings.Contains(got, `"minLength":1`) {
		t.Fatalf("schema %s", got)
	}
	if len(f.Agents) != 2 || f.Agents[1].Name != "z" || f.Agents[1].ModelArgs["temperature"] != 0.5 {
		t.Fatalf("agents %+v", f.Agents)
	}
}
