package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type modelKey struct{ provider, model string }

// modelChildren are one provider and model's bound series.
type modelChildren struct {
	ok, failed            prometheus.Counter
	duration              prometheus.Observer
	input, output         prometheus.Counter
	cacheRead, cacheWrite prometheus.Counter
	cost                  prometheus.Counter
}

// MaxModelSeries bounds the model names one provider's series are kept
// for: the model is whatever a submitter names, and each new name would
// add series for good. Past it, a new name's calls count under
// OtherModel.
const MaxModelSeries = 32

// OtherModel is the model label of the calls of a provider's models past
// MaxModelSeries.
const OtherModel = "other"

func (m *Metrics) model(provider, name string) *modelChildren {
	if c, ok := m.models.Load(modelKey{provider, name}); ok {
		return c.(*modelChildren)
	}
	m.modelsMu.Lock()
	defer m.modelsMu.Unlock()
	if name != OtherModel {
		if m.modelNames[provider] >= MaxModelSeries {
			name = OtherModel
		} else if _, ok := m.models.Load(modelKey{provider, name}); !ok {
			m.modelNames[provider]++
		}
	}
	k := modelKey{provider, name}
	if c, ok := m.models.Load(k); ok {
		return c.(*modelChildren)
	}
	c := &modelChildren{
		ok:         m.modelRequests.WithLabelValues(provider, name, ModelOK),
		failed:     m.modelRequests.WithLabelValues(provider, name, ModelError),
		duration:   m.modelDuration.WithLabelValues(provider, name),
		input:      m.modelTokens.WithLabelValues(provider, name, "input"),
		output:     m.modelTokens.WithLabelValues(provider, name, "output"),
		cacheRead:  m.modelCache.WithLabelValues(provider, name, "read"),
		cacheWrite: m.modelCache.WithLabelValues(provider, name, "write"),
		cost:       m.modelCost.WithLabelValues(provider, name),
	}
	m.models.Store(k, c)
	return c
}

// ModelCall records one model call of provider's model.
func (m *Metrics) ModelCall(provider, name string, d time.Duration, input, output int64, err error) {
	if m == nil {
		return
	}
	c := m.model(provider, name)
	if err != nil {
		c.failed.Inc()
	} else {
		c.ok.Inc()
	}
	c.duration.Observe(d.Seconds())
	if input > 0 {
		c.input.Add(float64(input))
	}
	if output > 0 {
		c.output.Add(float64(output))
	}
}

// ModelUsage records what ModelCall does not: the cached parts of one
// successful call's input and its cost in US dollars (nil: no price).
func (m *Metrics) ModelUsage(provider, name string, cacheRead, cacheWrite int64, costUSD *float64) {
	if m == nil {
		return
	}
	c := m.model(provider, name)
	if cacheRead > 0 {
		c.cacheRead.Add(float64(cacheRead))
	}
	if cacheWrite > 0 {
		c.cacheWrite.Add(float64(cacheWrite))
	}
	if costUSD != nil && *costUSD > 0 {
		c.cost.Add(*costUSD)
	}
}

// ModelRetry counts a retried model call; reason is rate_limited or server_error.
func (m *Metrics) ModelRetry(provider, reason string) {
	if m != nil {
		m.modelRetries.WithLabelValues(provider, reason).Inc()
	}
}

type toolChildren struct {
	ok, failed, denied prometheus.Counter
	duration           prometheus.Observer
}

// ToolCall records one tool call's outcome (ok, error, denied) and latency.
func (m *Metrics) ToolCall(tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	var c *toolChildren
	if v, ok := m.tools.Load(tool); ok {
		c = v.(*toolChildren)
	} else {
		c = &toolChildren{
			ok:       m.toolCalls.WithLabelValues(tool, ToolOK),
			failed:   m.toolCalls.WithLabelValues(tool, ToolError),
			denied:   m.toolCalls.WithLabelValues(tool, ToolDenied),
			duration: m.toolDuration.WithLabelValues(tool),
		}
		v, _ := m.tools.LoadOrStore(tool, c)
		c = v.(*toolChildren)
	}
	switch outcome {
	case ToolOK:
		c.ok.Inc()
	case ToolDenied:
		c.denied.Inc()
	default:
		c.failed.Inc()
	}
	c.duration.Observe(d.Seconds())
}
