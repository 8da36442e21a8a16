// Package runner is the agent loop: a thread's system prompt and task go to its
// model, the tool calls that come back run (in parallel or in order), their
// results go back, and so on until a final answer, a handoff, a failure or the
// turn limit.
//
// The runner knows nothing of where helpers execute. It asks a Spawner for
// them: Local runs them in this process; a cluster spawner sends them to the
// coordinator. Either way the parent's tool call blocks until the helper ends.
package runner
