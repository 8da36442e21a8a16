// Package quota paces one process's, or one cluster's, calls to model
// providers within the providers' quotas.
//
// Every helper agent calls a provider over HTTP, and providers bound
// requests a minute, tokens a minute and calls at once, answering 429 when
// a bound is passed. A fan-out of hundreds of helpers would mostly be
// refused, and retried, and refused again, if each call went when it
// liked. A Limiter holds one endpoint's quota in memory and hands out
// tickets instead: a call takes one before it is sent (Limiter.Take, the
// model.Gate of the endpoint) and gives it back with what the provider
// answered (Ticket.Done). It is pure: it reads no network and keeps no
// goroutine, so the coordinator can hold the whole cluster's limiters
// (Registry) and serve them over its transport, releasing what a dead
// worker held (TakeFor, ReleaseOwner).
//
// # Pacing
//
// Requests and tokens are token buckets that refill continuously, as the
// providers' own do, kept a hair inside the provider's (a little slower,
// a call smaller) so that calls granted at once but arriving a little
// apart are not refused. A call waits until every bucket has room, no
// Retry-After pause is running and the calls in flight are below their
// bound; its estimated tokens are reserved, and corrected by the usage
// its answer reports.
//
// # Learning
//
// Undeclared limits are learned, and declared ones only ever lowered:
//
//   - A limit header (x-ratelimit-limit-*, anthropic-ratelimit-*-limit)
//     gives the per-minute rate; the largest remaining+1 seen gives the
//     request burst. Each answer's remaining count lowers the bucket to
//     what it proves, counting every call granted after the answered one
//     as having arrived after the count, so late and reordered answers
//     never grant more than the provider holds.
//   - A 429 without headers means the provider's bucket was empty when the
//     call arrived. The calls it accepted between two such refusals are
//     what it refilled meanwhile, so that count over the time between
//     measures its rate whatever its burst; the limiter paces at 90% of
//     it and raises the pace slowly while no refusal comes, to find room
//     the provider gives later.
//   - Retry-After (or retry-after-ms) pauses the whole endpoint.
//   - Before anything is known, calls go unpaced, but only a few at once
//     (a window that grows with each accepted answer), so that a fan-out
//     against a provider that says nothing is refused a little, not a lot.
//
// # Fairness
//
// Calls that wait are served round robin over runs, then round robin over
// the threads of a run, first come first served within a thread, so a run
// with a few calls is not held behind another run's backlog. A waiting
// call tells the model.QuotaNotice in its context why it waits and when it
// goes on, and leaves the queue when its context ends.
package quota
