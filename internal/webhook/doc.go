// Package webhook tells other systems that a run ended, by HTTP, as the
// Standard Webhooks specification (www.standardwebhooks.com) says: each
// call is a JSON body signed with a shared secret, its headers naming the
// message (webhook-id, the same on every retry of it), when it was sent
// (webhook-timestamp) and the signature (webhook-signature).
//
// A message is built from a run's final record (ForRun) and kept in the
// store before the run's submission is acked, so a coordinator that dies
// loses none: a Deliverer, in any coordinator, takes messages from the
// store's queue and calls their URL, giving each back to the queue with a
// growing delay (exponential, with jitter) when the call fails, up to
// Config.Attempts calls. A 2xx answer delivers it; 410 Gone drops it.
//
// Which URLs a submitter may name is an AllowList of prefixes, so a
// submission cannot make the coordinator call an address of its own
// network.
package webhook
