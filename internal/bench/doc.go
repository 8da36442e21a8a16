// Package bench measures Formica's hot path against the floors it is built
// on, in one process run: `formica bench` is its command line.
//
// Every scenario starts what it needs itself — an embedded NATS server, a
// coordinator and workers (embedded.Stack), the sim model at zero latency
// unless stated — and measures its own baseline on the same server, so a
// scenario run alone (--scenario) still yields its ratio:
//
//   - floors: a goroutine call with a channel reply, and raw NATS
//     request-reply over the in-process pipe and over loopback TCP: p50/p99
//     of sequential round trips, and requests/s with 64 in flight.
//   - spawn: one `agent` call through the whole path (parent thread on worker
//     A, coordinator, helper on worker B, reply), sequential, timed from the
//     parent's tool.call event to its tool.result event (both stamped on
//     worker A), next to raw round trips on the same server and kind of
//     connection. Ratio: spawn p50 / (2 × raw p50).
//   - throughput: 64 runs at once, each root a parent that spawns its
//     helpers one after another (parallel_tool_calls off), over 4 workers.
//     Helpers/s is helpers over the wall time from the first submission to
//     the last record, so root start-up is included (amortised over the
//     helpers of each parent). Ratio: helpers/s / (raw requests/s with 64
//     in flight on the same in-process server / 2).
//   - fanout: one root fans out to N helpers of latency L over W workers of
//     S slots, agent_max_threads = N; makespan from the root's first
//     tool.call to its last tool.result. Ratio: makespan /
//     (ceil(N / (W*S)) * L).
//   - scaling: one root fans out to 1, 10, 100, 1,000 and 10,000 zero-latency
//     helpers; cost per helper is the fan-out makespan divided by the helper
//     count (median of repeats at small sizes). Ratio: cost at the largest
//     size (10,000) / cost at 100.
//   - memory: bytes per live helper in the coordinator and in a worker, and
//     per parked parent. The coordinator and the workers run in two child
//     processes (`formica bench --role coordinator|workers`) on a NATS
//     server in this process, so each side's growth is measured in a heap of
//     its own: runtime.ReadMemStats after runtime.GC, HeapAlloc + StackInuse
//     (goroutine stacks are memory a helper costs too). Deltas are taken
//     against the same processes idle after a warm-up run, with N helpers
//     alive and blocked in a long sim call; parked parents are measured as a
//     tree of P parents each waiting on one blocked helper, minus P live
//     helpers. The figures include each helper's conversation (a system
//     prompt and a one-line task, about 300 bytes with sim).
//
// Times are wall-clock and the machine is shared: Result records the load
// average before and after, and nothing here asserts on times.
package bench
