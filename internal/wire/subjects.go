package wire

// Subjects. Ids are UUIDs or worker names without dots, so each is one token.
const (
	// SubjectSubmit takes run submissions; coordinators share it in a queue group.
	SubjectSubmit = "formica.runs.submit"
	// SubjectRunCancel reaches every coordinator; the run's owner acts.
	SubjectRunCancel = "formica.runs.cancel"
	// SubjectWorkerHeartbeats carries every worker's heartbeat.
	SubjectWorkerHeartbeats = "formica.workers.hb"
	// SubjectCoordHeartbeats carries every coordinator's heartbeat.
	SubjectCoordHeartbeats = "formica.coord.hb"
	// QueueCoordinators is the queue group of coordinators on SubjectSubmit.
	QueueCoordinators = "coordinators"
	// SubjectWorkers asks any coordinator for the live workers.
	SubjectWorkers = "formica.workers.list"
	// EventsAll matches every run's events.
	EventsAll = "formica.events.>"
)

// SubjectSpawn is where a coordinator takes spawn requests for its runs.
func SubjectSpawn(coordinator string) string { return "formica.coord." + coordinator + ".spawn" }

// SubjectApproval is where a coordinator takes approval requests for its runs.
func SubjectApproval(coordinator string) string { return "formica.coord." + coordinator + ".approval" }

// SubjectExec is a worker's own subject for placed threads.
func SubjectExec(worker string) string { return "formica.worker." + worker + ".exec" }

// SubjectCancel is a worker's own subject for cancelling threads.
func SubjectCancel(worker string) string { return "formica.worker." + worker + ".cancel" }

// SubjectEvents is where one run's events are published; the event type
// follows, so SubjectEvents(run)+".>" follows the whole tree.
func SubjectEvents(run string) string { return "formica.events." + run }

// SubjectApprover is where the submitter of a run answers its approvals.
func SubjectApprover(run string) string { return "formica.approver." + run }

// Header names carried on every message that concerns a run or thread.
const (
	HeaderType        = "Formica-Type"
	HeaderRun         = "Formica-Run"
	HeaderThread      = "Formica-Thread"
	HeaderTraceparent = "traceparent"
)

// SubjectThreadCancel is where a coordinator takes requests to cancel threads
// of its runs (a parent whose own thread was cancelled on a worker).
func SubjectThreadCancel(coordinator string) string {
	return "formica.coord." + coordinator + ".cancel"
}
