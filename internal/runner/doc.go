// Package runner is the agent loop: a thread's system prompt and task go to its
// model, the tool calls that come back run (in parallel or in order), their
// results go back, and so on until a final answer, a handoff, a failure or the
// turn limit.
//
// Two kinds of call are the loop's own rather than a tool's: a handoff
// (transfer_to_<name>) switches the thread's agent, and an `agent` call
// starts a helper. The runner knows nothing of where helpers execute: it
// asks its Spawner (a worker's sends the call to the run's coordinator, which
// admits and derives the helper), and the parent's turn waits until the
// helper ends. The calls of a parallel turn wait as data, held by the
// Spawner, not each on a goroutine of the loop's.
package runner
