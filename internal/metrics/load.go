package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Load is how busy a worker is: Live or Draining 1, and its slots.
type Load struct {
	Live, Draining      int
	Slots, Used, Parked int
}

// loadCollector reports formica_workers and the slot gauges at scrape time,
// summed over the workers of this process. Only workers report them: every
// worker is counted by itself alone, so summing the series of all processes
// gives the fleet (a coordinator's view of the fleet, which every
// coordinator holds, would count it once per coordinator).
type loadCollector struct {
	workers, slots, used, parked *prometheus.Desc

	mu      sync.Mutex
	sources []func() Load
}

func (c *loadCollector) init() {
	c.workers = prometheus.NewDesc("formica_workers", "This process's workers, by state (live, draining).", []string{"state"}, nil)
	c.slots = prometheus.NewDesc("formica_worker_slots", "Execution slots of this process's workers.", nil, nil)
	c.used = prometheus.NewDesc("formica_worker_slots_used", "Slots held by running threads.", nil, nil)
	c.parked = prometheus.NewDesc("formica_worker_threads_parked", "Threads waiting for their helpers, holding no slot.", nil, nil)
}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.workers
	ch <- c.slots
	ch <- c.used
	ch <- c.parked
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := c.sources
	c.mu.Unlock()
	if len(sources) == 0 {
		return
	}
	var l Load
	for _, fn := range sources {
		w := fn()
		l.Live += w.Live
		l.Draining += w.Draining
		l.Slots += w.Slots
		l.Used += w.Used
		l.Parked += w.Parked
	}
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(l.Live), "live")
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(l.Draining), "draining")
	ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(l.Slots))
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(l.Used))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(l.Parked))
}

// WorkerLoad adds a worker's source of its own gauges (Live 1 or Draining
// 1); a process hosting several workers reports their sum.
func (m *Metrics) WorkerLoad(fn func() Load) {
	if m != nil {
		m.load.mu.Lock()
		m.load.sources = append(slices.Clip(m.load.sources), fn)
		m.load.mu.Unlock()
	}
}

// Queue is the run queue's depth.
type Queue struct{ Pending, AckPending uint64 }

// queueScrapeTimeout bounds the NATS request a scrape makes for the queue.
const queueScrapeTimeout = 2 * time.Second

// queueCollector asks the queue's consumer at scrape time, so an idle
// coordinator makes no requests between scrapes. A queue that does not
// answer within queueScrapeTimeout (JetStream busy with a burst) leaves its
// two gauges out of that scrape: failing it would fail every other metric
// with it, and the scrape answer 500, just when the load is worth seeing.
type queueCollector struct {
	pending, ackPending *prometheus.Desc

	mu sync.Mutex
	fn func(context.Context) (Queue, error)
}

func (c *queueCollector) init() {
	c.pending = prometheus.NewDesc("formica_queue_pending_messages", "Submissions waiting in the queue.", nil, nil)
	c.ackPending = prometheus.NewDesc("formica_queue_ack_pending_messages", "Submissions delivered and not yet acked (runs in progress).", nil, nil)
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.ackPending
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	if fn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueScrapeTimeout)
	defer cancel()
	q, err := fn(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(q.Pending))
	ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(q.AckPending))
}

// QueueDepth sets the source of the queue gauges.
func (m *Metrics) QueueDepth(fn func(context.Context) (Queue, error)) {
	if m != nil {
		m.qc.mu.Lock()
		m.qc.fn = fn
		m.qc.mu.Unlock()
	}
}
