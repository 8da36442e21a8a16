// Package metrics defines every Prometheus metric Formica exports, in one
// place: the names and labels are part of the documented contract
// (docs/metrics.md). A process builds one Metrics, hands it to the coordinator,
// workers and HTTP API it hosts, and serves Handler at /metrics.
//
// Labels never carry run or thread ids (unbounded). Children for the fixed
// label values are bound once here, so an increment on the spawn path is an
// atomic add without a map lookup or an allocation; children for labels
// taken from specs (tool, model, provider) are cached on first use.
//
// Every method is safe on a nil *Metrics, which records nothing: libraries
// and tests that do not care pass none.
package metrics

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label values the metrics take. Statuses are event.Status values.
const (
	OutcomePlaced       = "placed"
	OutcomeBusy         = "busy"
	OutcomeNoResponders = "no_responders"
	OutcomeLost         = "lost"
	OutcomeTimeout      = "timeout"

	ToolOK     = "ok"
	ToolError  = "error"
	ToolDenied = "denied"

	DecisionAllow   = "allow"
	DecisionDeny    = "deny"
	DecisionTimeout = "timeout"

	ModelOK    = "ok"
	ModelError = "error"

	// Webhook calls: answered 2xx; failed and given back to try again;
	// failed for good (the last attempt, or 410 Gone).
	WebhookDelivered = "delivered"
	WebhookRetried   = "retried"
	WebhookFailed    = "failed"
)

var (
	statuses   = []string{"succeeded", "failed", "cancelled"}
	refusals   = []string{"depth", "threads", "budget"}
	placements = []string{OutcomePlaced, OutcomeBusy, OutcomeNoResponders, OutcomeLost, OutcomeTimeout}
	decisions  = []string{DecisionAllow, DecisionDeny, DecisionTimeout}
	webhooks   = []string{WebhookDelivered, WebhookRetried, WebhookFailed}
)

// Buckets, in seconds: runs and threads last seconds to hours; the spawn
// path is measured in fractions of a millisecond.
var (
	longBuckets  = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	shortBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	callBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
)

// Metrics holds one process's metrics and their registry.
type Metrics struct {
	reg *prometheus.Registry

	runsSubmitted prometheus.Counter
	runsFinished  map[string]prometheus.Counter
	runsActive    prometheus.Gauge
	runDuration   prometheus.Observer
	runQueueWait  prometheus.Observer
	runAttempts   prometheus.Counter

	redeliveries prometheus.Counter
	takeovers    prometheus.Counter

	threadsSpawned  prometheus.Counter
	spawnsRefused   *prometheus.CounterVec
	refusedBound    map[string]prometheus.Counter
	threadsFinished map[string]prometheus.Counter
	threadsLive     prometheus.Gauge
	threadDuration  prometheus.Observer
	spawnLatency    prometheus.Observer
	placementWait   prometheus.Observer
	placements      map[string]prometheus.Counter

	workersLost prometheus.Counter
	workersLeft prometheus.Counter

	journalReplays     prometheus.Counter
	journalReusedTotal prometheus.Counter
	journalWriteErrors prometheus.Counter

	modelRequests *prometheus.CounterVec
	modelDuration *prometheus.HistogramVec
	modelTokens   *prometheus.CounterVec
	modelCache    *prometheus.CounterVec
	modelCost     *prometheus.CounterVec
	modelRetries  *prometheus.CounterVec
	models        sync.Map // modelKey -> *modelChildren
	modelsMu      sync.Mutex
	modelNames    map[string]int // provider -> model names with series of their own

	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
	tools        sync.Map // tool name -> *toolChildren

	approvalsPending prometheus.Gauge
	approvals        map[string]prometheus.Counter

	webhookDeliveries map[string]prometheus.Counter
	approvalWait      prometheus.Observer

	httpRequests *prometheus.CounterVec
	sseClients   prometheus.Gauge

	quotaWait *prometheus.HistogramVec
	quota     quotaCollector

	load   loadCollector
	qc     queueCollector
	assets assetsCollector
}

// Role is what a process does, for the metrics it exports.
type Role uint8

const (
	// Coordinator: runs, the queue, the tree, placements, workers lost
	// and left, approvals, quotas, the HTTP API.
	Coordinator Role = 1 << iota
	// Worker: model and tool calls.
	Worker
	// All is a coordinator hosting workers (--local-workers, formica run).
	All = Coordinator | Worker
)

// New builds the metrics of a process doing roles: it exports only those
// (a worker exports no run metric, which would read 0; a coordinator
// without local workers no worker gauge), with the
// Go and process collectors and formica_build_info. Recording a metric of
// another role is allowed and exported nowhere.
func New(roles Role) *Metrics {
	reg := prometheus.NewRegistry()
	return build(roles, reg, reg)
}

// build makes the metrics, registering them with r, which is reg or a
// wrapper of it (a test's, to list every metric's description).
func build(roles Role, reg *prometheus.Registry, r prometheus.Registerer) *Metrics {
	f := factory{reg: r, on: roles&Coordinator != 0} // the coordinator's
	fw := factory{reg: r, on: roles&Worker != 0}     // the workers'
	both := factory{reg: r, on: true}
	m := &Metrics{reg: reg, modelNames: map[string]int{}}

	m.runsSubmitted = f.counter("formica_runs_submitted_total", "Runs this coordinator took on: first deliveries from the queue and direct submissions.")
	m.runsFinished = bind(f.counterVec("formica_runs_finished_total", "Runs that ended, by final status.", "status"), statuses)
	m.runsActive = f.gauge("formica_runs_active", "Runs running on this coordinator now.")
	m.runDuration = f.histogram("formica_run_duration_seconds", "How long runs ran, start to final status.", longBuckets)
	m.runQueueWait = f.histogram("formica_run_queue_wait_seconds", "How long runs waited in the queue before a start.", longBuckets)
	m.runAttempts = f.counter("formica_run_attempts_total", "Run starts, redelivered runs included.")

	m.redeliveries = f.counter("formica_queue_redeliveries_total", "Submissions delivered again (a coordinator died or gave one back).")
	m.takeovers = f.counter("formica_run_takeovers_total", "Queued runs this coordinator took over from a coordinator whose lease lapsed.")

	m.threadsSpawned = f.counter("formica_threads_spawned_total", "Helpers admitted.")
	m.spawnsRefused = f.counterVec("formica_spawns_refused_total", "Spawns refused by a limit, by reason.", "reason")
	m.refusedBound = bind(m.spawnsRefused, refusals)
	m.threadsFinished = bind(f.counterVec("formica_threads_finished_total", "Threads that ended, root included, by status.", "status"), statuses)
	m.threadsLive = f.gauge("formica_threads_live", "Live helpers over all runs of this coordinator.")
	m.threadDuration = f.histogram("formica_thread_duration_seconds", "How long threads lived, admission to end.", longBuckets)
	m.spawnLatency = f.histogram("formica_spawn_latency_seconds", "Spawn request in to helper started on a worker.", shortBuckets)
	m.placementWait = f.histogram("formica_placement_wait_seconds", "How long a placement waited for a free slot.", shortBuckets)
	m.placements = bind(f.counterVec("formica_placements_total", "Placements of threads on workers, by outcome.", "outcome"), placements)

	m.workersLost = f.counter("formica_workers_lost_total", "Workers presumed lost (silent or not answering).")
	m.workersLeft = f.counter("formica_workers_left_total", "Workers that stopped cleanly (drained), as their last heartbeat said.")

	m.journalReplays = f.counter("formica_journal_replays_total", "Placements of threads that replay journaled work (run delivered again or resumed, worker lost).")
	m.journalReusedTotal = f.counter("formica_journal_threads_reused_total", "Finished threads answered from the journal without being placed.")
	m.journalWriteErrors = both.counter("formica_journal_write_errors_total", "Journal writes that were not stored (no ack in time, or refused); the work went on.")

	m.modelRequests = fw.counterVec("formica_model_requests_total", "Model calls, by provider, model and outcome (ok, error).", "provider", "model", "outcome")
	m.modelDuration = fw.histogramVec("formica_model_request_duration_seconds", "Model call latency, retries included.", callBuckets, "provider", "model")
	m.modelTokens = fw.counterVec("formica_model_tokens_total", "Tokens, by provider, model and direction (input, output).", "provider", "model", "direction")
	m.modelCache = fw.counterVec("formica_model_cache_tokens_total", "Input tokens read from (read) or written to (write) the provider's prompt cache, by provider, model and kind; part of the input tokens.", "provider", "model", "kind")
	m.modelCost = fw.counterVec("formica_model_cost_usd_total", "What model calls cost in US dollars at the process's prices, by provider and model; calls of a model with no price add nothing.", "provider", "model")
	m.modelRetries = fw.counterVec("formica_model_retries_total", "Model calls retried, by provider and reason (rate_limited, server_error).", "provider", "reason")

	m.toolCalls = fw.counterVec("formica_tool_calls_total", "Tool calls, by tool and outcome (ok, error, denied).", "tool", "outcome")
	m.toolDuration = fw.histogramVec("formica_tool_call_duration_seconds", "Tool call latency, approvals included.", callBuckets, "tool")

	m.approvalsPending = f.gauge("formica_approvals_pending", "Approvals waiting for an answer.")
	m.approvals = bind(f.counterVec("formica_approvals_total", "Approvals answered, by decision (allow, deny, timeout).", "decision"), decisions)
	m.approvalWait = f.histogram("formica_approval_wait_seconds", "How long approvals waited for their answer.", longBuckets)

	m.webhookDeliveries = bind(f.counterVec("formica_webhook_deliveries_total", "Webhook calls, by outcome (delivered; retried: failed and tried again later; failed: given up).", "outcome"), webhooks)

	m.httpRequests = f.counterVec("formica_http_requests_total", "HTTP requests, by route pattern and status code.", "route", "code")
	m.sseClients = f.gauge("formica_sse_clients", "Open event streams.")

	m.quotaWait = f.histogramVec("formica_quota_wait_seconds", "How long model calls waited for their endpoint's quota (calls that waited).", longBuckets, "endpoint")
	m.quota.init()
	m.load.init()
	m.qc.init()
	m.assets.init()
	f.register(&m.quota, &m.qc, &m.assets)
	fw.register(&m.load)

	bi := both.gaugeVec("formica_build_info", "Always 1; the labels name the build.", "version", "go_version")
	bi.WithLabelValues(version(), runtime.Version()).Set(1)
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format (or OpenMetrics
// when asked).
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Registry is the registry behind Handler, for tests and embedders.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// factory makes metrics, and registers them when on: off, they record
// into nothing exported.
type factory struct {
	reg prometheus.Registerer
	on  bool
}

func (f factory) register(cs ...prometheus.Collector) {
	if f.on {
		f.reg.MustRegister(cs...)
	}
}

// registered is c, registered with f.
func registered[C prometheus.Collector](f factory, c C) C {
	f.register(c)
	return c
}

func (f factory) counter(name, help string) prometheus.Counter {
	return registered(f, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return registered(f, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	return registered(f, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return registered(f, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	return registered(f, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return registered(f, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

// bind makes the children for every known value, so they show as 0 from the
// first scrape and cost no lookup later.
func bind(v *prometheus.CounterVec, values []string) map[string]prometheus.Counter {
	out := make(map[string]prometheus.Counter, len(values))
	for _, s := range values {
		out[s] = v.WithLabelValues(s)
	}
	return out
}

// inc counts one under value in bound, children made by bind; a value
// without one counts nowhere.
func inc(bound map[string]prometheus.Counter, value string) {
	if c := bound[value]; c != nil {
		c.Inc()
	}
}
