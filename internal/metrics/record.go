package metrics

import (
	"strconv"
	"time"
)

// RunSubmitted counts a run this coordinator took on.
func (m *Metrics) RunSubmitted() {
	if m != nil {
		m.runsSubmitted.Inc()
	}
}

// RunStarted counts a start of a run (an attempt), active until RunEnded.
func (m *Metrics) RunStarted() {
	if m != nil {
		m.runAttempts.Inc()
		m.runsActive.Inc()
	}
}

// QueueWaited observes how long a queued run waited before this start.
func (m *Metrics) QueueWaited(d time.Duration) {
	if m != nil && d >= 0 {
		m.runQueueWait.Observe(d.Seconds())
	}
}

// RunEnded undoes RunStarted's active count; final says the run reached a
// final status (not handed back to the queue), counted under status.
func (m *Metrics) RunEnded(status string, ran time.Duration, final bool) {
	if m == nil {
		return
	}
	m.runsActive.Dec()
	if !final {
		return
	}
	inc(m.runsFinished, status)
	m.runDuration.Observe(ran.Seconds())
}

// Redelivered counts a submission delivered again.
func (m *Metrics) Redelivered() {
	if m != nil {
		m.redeliveries.Inc()
	}
}

// TakenOver counts a run taken over from a coordinator whose lease lapsed.
func (m *Metrics) TakenOver() {
	if m != nil {
		m.takeovers.Inc()
	}
}

// JournalReplayed counts a placement of a thread that replays journaled work.
func (m *Metrics) JournalReplayed() {
	if m != nil {
		m.journalReplays.Inc()
	}
}

// ThreadReused counts a finished thread answered from the journal.
func (m *Metrics) ThreadReused() {
	if m != nil {
		m.journalReusedTotal.Inc()
	}
}

// JournalWriteFailed counts a journal write that was not stored.
func (m *Metrics) JournalWriteFailed() {
	if m != nil {
		m.journalWriteErrors.Inc()
	}
}

// SpawnAdmitted counts an admitted helper, live until HelperEnded.
func (m *Metrics) SpawnAdmitted() {
	if m != nil {
		m.threadsSpawned.Inc()
		m.threadsLive.Inc()
	}
}

// SpawnRefused counts a refusal for reason (depth, threads, budget).
func (m *Metrics) SpawnRefused(reason string) {
	if m == nil {
		return
	}
	c := m.refusedBound[reason]
	if c == nil {
		c = m.spawnsRefused.WithLabelValues(reason)
	}
	c.Inc()
}

// ThreadEnded counts a thread's end; helper says it was a helper (live
// until now), lived how long since its admission.
func (m *Metrics) ThreadEnded(status string, lived time.Duration, helper bool) {
	if m == nil {
		return
	}
	inc(m.threadsFinished, status)
	if helper {
		m.threadsLive.Dec()
	}
	m.threadDuration.Observe(lived.Seconds())
}

// SpawnStarted observes a helper's spawn latency: request in to started.
func (m *Metrics) SpawnStarted(d time.Duration) {
	if m != nil {
		m.spawnLatency.Observe(d.Seconds())
	}
}

// PlacementWaited observes how long a placement waited for a slot.
func (m *Metrics) PlacementWaited(d time.Duration) {
	if m != nil {
		m.placementWait.Observe(d.Seconds())
	}
}

// Placement counts one placement's outcome.
func (m *Metrics) Placement(outcome string) {
	if m != nil {
		inc(m.placements, outcome)
	}
}

// WorkerLost counts a worker presumed lost.
func (m *Metrics) WorkerLost() {
	if m != nil {
		m.workersLost.Inc()
	}
}

// WorkerLeft counts a worker that stopped cleanly.
func (m *Metrics) WorkerLeft() {
	if m != nil {
		m.workersLeft.Inc()
	}
}

// ApprovalAsked counts an approval waiting for its answer.
func (m *Metrics) ApprovalAsked() {
	if m != nil {
		m.approvalsPending.Inc()
	}
}

// ApprovalAnswered ends an ApprovalAsked with its decision (allow, deny,
// timeout) after waiting d.
func (m *Metrics) ApprovalAnswered(decision string, d time.Duration) {
	if m == nil {
		return
	}
	m.approvalsPending.Dec()
	inc(m.approvals, decision)
	m.approvalWait.Observe(d.Seconds())
}

// HTTPRequest counts one request by its route pattern and status code.
func (m *Metrics) HTTPRequest(route string, code int) {
	if m != nil {
		m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	}
}

// SSEClient adds delta (+1 on open, -1 on close) to the open streams.
func (m *Metrics) SSEClient(delta int) {
	if m != nil {
		m.sseClients.Add(float64(delta))
	}
}

// WebhookDelivery counts a webhook call by outcome (WebhookDelivered,
// WebhookRetried, WebhookFailed).
func (m *Metrics) WebhookDelivery(outcome string) {
	if m != nil {
		inc(m.webhookDeliveries, outcome)
	}
}
