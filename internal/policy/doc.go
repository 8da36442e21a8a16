// Package policy is what a spec says about tools, as data with the rules
// that read it: permission policies (which calls may run, stacked so a helper
// can only narrow its parent's), the approvals that answer an "ask", and
// visibility policies (which of its parent's tools a helper sees). Specs,
// journals, threads and the protocol carry them, so they live below the
// tools themselves.
package policy
