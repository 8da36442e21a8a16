package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// EndpointQuota is one model endpoint's quota as its holder (a
// coordinator) sees it at scrape time.
type EndpointQuota struct {
	Endpoint         string
	InFlight, Queued int64
	// Limits are the quota's limits by kind (requests_per_minute,
	// tokens_per_minute, input_tokens_per_minute, output_tokens_per_minute,
	// in_flight) and source (declared, learned); absent: unknown.
	Limits []QuotaLimit
	// Grants, Refusals and Waits count shares granted, the provider's
	// refusals (429) reported back, and grants that had to wait.
	Grants, Refusals, Waits uint64
}

// QuotaLimit is one limit of an endpoint's quota.
type QuotaLimit struct {
	Kind, Source string
	Value        float64
}

// quotaCollector reports the endpoints' quotas at scrape time.
type quotaCollector struct {
	inFlight, queued, limit, grants, refusals, waits *prometheus.Desc

	mu sync.Mutex
	fn func() []EndpointQuota
}

func (c *quotaCollector) init() {
	c.inFlight = prometheus.NewDesc("formica_quota_in_flight", "Model calls holding a share of their endpoint's quota now.", []string{"endpoint"}, nil)
	c.queued = prometheus.NewDesc("formica_quota_queued", "Model calls waiting for their endpoint's quota now.", []string{"endpoint"}, nil)
	c.limit = prometheus.NewDesc("formica_quota_limit", "An endpoint's quota, by kind and source (declared, learned).", []string{"endpoint", "kind", "source"}, nil)
	c.grants = prometheus.NewDesc("formica_quota_grants_total", "Shares of an endpoint's quota granted (one per attempt).", []string{"endpoint"}, nil)
	c.refusals = prometheus.NewDesc("formica_quota_refusals_total", "Attempts the provider refused for quota (429).", []string{"endpoint"}, nil)
	c.waits = prometheus.NewDesc("formica_quota_waits_total", "Shares granted after a wait.", []string{"endpoint"}, nil)
}

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inFlight, c.queued, c.limit, c.grants, c.refusals, c.waits} {
		ch <- d
	}
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	if fn == nil {
		return
	}
	for _, q := range fn() {
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(q.InFlight), q.Endpoint)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(q.Queued), q.Endpoint)
		for _, l := range q.Limits {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, l.Value, q.Endpoint, l.Kind, l.Source)
		}
		ch <- prometheus.MustNewConstMetric(c.grants, prometheus.CounterValue, float64(q.Grants), q.Endpoint)
		ch <- prometheus.MustNewConstMetric(c.refusals, prometheus.CounterValue, float64(q.Refusals), q.Endpoint)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(q.Waits), q.Endpoint)
	}
}

// Quotas sets the source of the quota gauges: the coordinator that holds
// the endpoints' quotas.
func (m *Metrics) Quotas(fn func() []EndpointQuota) {
	if m != nil {
		m.quota.mu.Lock()
		m.quota.fn = fn
		m.quota.mu.Unlock()
	}
}

// QuotaWaited records how long a model call waited for its endpoint's quota.
func (m *Metrics) QuotaWaited(endpoint string, d time.Duration) {
	if m != nil {
		m.quotaWait.WithLabelValues(endpoint).Observe(d.Seconds())
	}
}
