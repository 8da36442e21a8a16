package journal

// AgentTool is the name of the tool whose calls start helpers (the tools
// package's AgentToolName): a model response's calls of it name the
// helpers the thread started.
const AgentTool = "agent"

// Children returns the helpers the thread of run started, as its trusted
// entries (Trusted) name them, each once, in the order they name them: the
// child of each spawn, and the helper each agent call of a model response
// starts (its id derives from the call: ThreadID), which a parent names
// before it journals the spawn, or without journaling it when it died in
// between. Reading a run's journal from its root through Children reads
// the threads the run has, and nothing else written under the run.
func Children(run, thread string, entries []Entry) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && id != thread && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, e := range entries {
		switch e.Kind {
		case KindSpawn:
			add(e.Child)
		case KindModel:
			if e.Message == nil {
				continue
			}
			for _, c := range e.Message.ToolCalls {
				if c.Name == AgentTool {
					add(ThreadID(run, thread, CallKey(e.Turn, c.ID)))
				}
			}
		}
	}
	return out
}
