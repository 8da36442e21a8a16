package spec

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Bounds on what Parse reads, checked before anything walks the document:
// the HTTP API parses specs from request bodies, and a YAML document can
// name one anchor many times, so a few hundred bytes of aliases may stand
// for billions of nodes to whatever expands them (the output schemas are
// written out as JSON with their aliases expanded).
const (
	// MaxBytes is the largest spec Parse reads.
	MaxBytes = 1 << 20
	// MaxNodes caps the nodes of a spec with every alias expanded, as
	// often as it is used.
	MaxNodes = 100_000
	// MaxDepth caps how deeply a spec's collections nest.
	MaxDepth = 64
)

// checkExpansion refuses a document that, with its aliases expanded,
// holds more than MaxNodes nodes or nests deeper than MaxDepth. Each node's
// expanded size is computed once, so the check costs the document's own
// size however much its aliases stand for.
func checkExpansion(doc *yaml.Node, filename string) error {
	type size struct{ nodes, depth int }
	memo := map[*yaml.Node]size{}
	var walk func(n *yaml.Node) size
	walk = func(n *yaml.Node) size {
		if n == nil {
			return size{}
		}
		if s, ok := memo[n]; ok {
			return s
		}
		memo[n] = size{MaxNodes + 1, MaxDepth + 1} // an alias back into itself
		var s size
		if n.Kind == yaml.AliasNode {
			s = walk(n.Alias)
		} else {
			s = size{nodes: 1}
			for _, c := range n.Content {
				cs := walk(c)
				s.nodes = min(s.nodes+cs.nodes, MaxNodes+1)
				s.depth = max(s.depth, cs.depth)
			}
			if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
				s.depth = min(s.depth+1, MaxDepth+1)
			}
		}
		memo[n] = s
		return s
	}
	s := walk(doc)
	switch {
	case s.nodes > MaxNodes:
		return &posError{file: filename, msg: fmt.Sprintf("more than %d nodes with its aliases expanded", MaxNodes)}
	case s.depth > MaxDepth:
		return &posError{file: filename, msg: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
	}
	return nil
}
