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
//     in flight on the same in-process server / 2). Wall-clock ratios swing
//     with whatever else the machine runs, so the scenario also reports what
//     load does not move: process CPU time per helper and per raw round trip
//     (and their ratio), heap allocations per helper, and NATS messages
//     published and delivered per helper.
//   - fanout: one root fans out to N helpers of latency L over W workers of
//     S slots, agent_max_threads = N; makespan from the root's first
//     tool.call to its last tool.result. Ratio: makespan /
//     (ceil(N / (W*S)) * L), at L and again at a slow model's latency
//     (FanoutSlowLatency, 1 s), where the path's own cost should vanish.
//   - scaling: one root fans out to 1, 10, 100, 1,000 and 10,000 zero-latency
//     helpers; cost per helper is the fan-out makespan divided by the helper
//     count (median of repeats at small sizes). Ratio: cost at the largest
//     size (10,000) / cost at 100.
//   - memory: bytes per live helper in the coordinator and in a worker, and
//     per parked parent. The coordinator, the parent's worker (one worker,
//     one slot: it hosts the root) and the helpers' workers run as three
//     child processes (`formica bench --role ...`) on a NATS server in this
//     process, so each side grows in a heap of its own: runtime.ReadMemStats
//     after runtime.GC, HeapAlloc + StackInuse (goroutine stacks are memory a
//     helper costs too). The delta is taken from the same processes idle
//     after a warm-up run to the moment N helpers are alive, blocked in a
//     long sim call. "Worker" is the helpers' workers divided by the helpers
//     they host: a live helper's own thread. The parent's side of each call
//     (its goroutine waiting for the reply on the parent's worker) is
//     reported apart. Parked parents are a tree of P parents each waiting on
//     one blocked helper, in fresh processes (a process that ran many
//     goroutines reuses their cached stacks), less P helpers and P calls at
//     the costs just measured. The figures include each helper's
//     conversation (a system prompt and a one-line task, about 300 bytes
//     with sim).
//   - quota: one root fans out to QuotaHelpers helpers over W workers
//     against a local OpenAI-compatible server (package quotaserver) that
//     allows QuotaRPM requests a minute (burst 10, 16 in flight,
//     QuotaLatency an answer), once learning the quota from its headers
//     and once with it declared. Ratio: makespan / the quota's ideal
//     ((calls - burst) at the quota's pace, plus three answers); also the
//     requests it refused and the helpers that failed.
//
// With Config.Rounds (`--rounds N`) the chosen scenarios run N times, one
// whole round after another, and Run returns their medians: each top-level
// ratio and each target's value is the median over the rounds that have it
// (the mean of the middle two for an even count), a target's verdict is
// taken on its median and its RoundValues (JSON "round_values") keep each
// round's value, and Rounds (JSON "rounds") holds each round's whole result,
// the scenarios' figures included. One round, the default, writes neither:
// its JSON is what it has always been.
//
// Times are wall-clock and the machine is shared: Result records the load
// average before and after, and nothing here asserts on times.
package bench
