package tools

// Merge concatenates tool lists so each name appears once: the first list
// holding a name wins, and order is first appearance. Visible tools are
// Merge(direct, shims): direct beats shim.
func Merge(lists ...[]Tool) []Tool {
	seen := map[string]bool{}
	var out []Tool
	for _, l := range lists {
		for _, t := range l {
			if seen[t.Name()] {
				continue
			}
			seen[t.Name()] = true
			out = append(out, t)
		}
	}
	return out
}

// Names returns the tools' names in order.
func Names(ts []Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}
