package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// AssetCount is one kind of JetStream stream the cluster's account holds
// (queue, events, ..., other) and how many consumers they have.
type AssetCount struct {
	Kind               string
	Streams, Consumers int
}

// assetsCollector reports the last count of the cluster's JetStream
// assets a coordinator made (it counts them every so often, not at scrape
// time); before the first count, nothing.
type assetsCollector struct {
	streams, consumers *prometheus.Desc

	mu    sync.Mutex
	count []AssetCount
}

func (c *assetsCollector) init() {
	c.streams = prometheus.NewDesc("formica_jetstream_streams", "JetStream streams of the cluster's account, by kind, at the coordinator's last count.", []string{"kind"}, nil)
	c.consumers = prometheus.NewDesc("formica_jetstream_consumers", "JetStream consumers of the cluster's account, by the kind of their stream, at the coordinator's last count.", []string{"kind"}, nil)
}

func (c *assetsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.streams
	ch <- c.consumers
}

func (c *assetsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	count := c.count
	c.mu.Unlock()
	for _, k := range count {
		ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(k.Streams), k.Kind)
		ch <- prometheus.MustNewConstMetric(c.consumers, prometheus.GaugeValue, float64(k.Consumers), k.Kind)
	}
}

// JetStreamAssets sets the count of the cluster's JetStream assets, every
// kind (those with no stream at 0), replacing the last one.
func (m *Metrics) JetStreamAssets(count []AssetCount) {
	if m != nil {
		m.assets.mu.Lock()
		m.assets.count = slices.Clone(count)
		m.assets.mu.Unlock()
	}
}
