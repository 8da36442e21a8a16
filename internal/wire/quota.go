package wire

import "github.com/formica-run/formica/internal/quota"

// The quota protocol (worker → the coordinator that holds the quotas, on
// SubjectQuota): a model call's attempt asks for its share with QuotaTake
// and waits; the coordinator answers QuotaWaiting as soon as the ask has to
// queue (and keeps the request alive with progress while it waits), then
// QuotaGrant. The attempt's end goes back as QuotaDone, which the
// coordinator acknowledges with TypeOK; a QuotaDone for an ask not yet
// granted withdraws it. Asks are keyed by ID, so a QuotaDone that overtakes
// its grant, or comes twice, is harmless.

// QuotaTake asks for one attempt's share of an endpoint's quota.
type QuotaTake struct {
	// ID names the ask; a fresh UUID per attempt.
	ID string `msgpack:"id"`
	// Endpoint is the endpoint's name; Key tells it from another of the
	// same name pointing elsewhere (providers.Endpoint.Key).
	Endpoint string `msgpack:"endpoint"`
	Key      string `msgpack:"key"`
	// Limits are what the worker's providers file declares for the
	// endpoint; the coordinator keeps the lowest declared.
	Limits quota.Limits `msgpack:"limits"`
	// RunID and ThreadID order waiting asks fairly.
	RunID        string `msgpack:"run_id"`
	ThreadID     string `msgpack:"thread_id"`
	InputTokens  int64  `msgpack:"input_tokens"`
	OutputTokens int64  `msgpack:"output_tokens"`
}

// QuotaWaiting says the ask queued, and why.
type QuotaWaiting struct {
	Reason string `msgpack:"reason"`
}

// QuotaDone ends an ask: the attempt's answer (Status 0: none came, or the
// ask is withdrawn), the provider's rate-limit headers and reported usage.
type QuotaDone struct {
	ID           string            `msgpack:"id"`
	Key          string            `msgpack:"key"`
	Status       int               `msgpack:"status,omitempty"`
	Header       map[string]string `msgpack:"header,omitempty"`
	InputTokens  int64             `msgpack:"input_tokens,omitempty"`
	OutputTokens int64             `msgpack:"output_tokens,omitempty"`
}
