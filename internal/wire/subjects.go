package wire

import "strings"

// Subjects. Ids are UUIDs or worker names without dots, so each is one token.
const (
	// SubjectSubmit takes runs to run at once, outside the queue (`formica
	// run --nats`); coordinators share it in a queue group.
	SubjectSubmit = "formica.runs.submit"
	// SubjectRunCancel reaches every coordinator; the run's owner acts.
	SubjectRunCancel = "formica.runs.cancel"
	// SubjectEnqueue takes submissions for the durable queue (client →
	// coordinator, in the coordinators' queue group): the coordinator checks
	// each against its own ceilings, writes the queued record and enqueues
	// it, so clients never write records or the queue themselves.
	SubjectEnqueue = "formica.runs.enqueue"
	// SubjectCancelRequest asks any coordinator to cancel a whole run
	// (RunCancel, in the coordinators' queue group): it records the cancel
	// in the run's record and tells the run's owner on SubjectRunCancel.
	SubjectCancelRequest = "formica.runs.cancel.request"
	// SubjectResume asks any coordinator to queue a failed or cancelled run
	// again (RunResume, in the coordinators' queue group).
	SubjectResume = "formica.runs.resume"
	// SubjectWorkerHeartbeats matches every worker's heartbeat subject
	// (SubjectWorkerHeartbeat).
	SubjectWorkerHeartbeats = "formica.workers.hb.*"
	// SubjectCoordHeartbeats carries every coordinator's heartbeat.
	SubjectCoordHeartbeats = "formica.coord.hb"
	// QueueCoordinators is the queue group of coordinators on SubjectSubmit
	// and the other subjects any one coordinator answers.
	QueueCoordinators = "coordinators"
	// SubjectWorkers asks any coordinator for the live workers.
	SubjectWorkers = "formica.workers.list"
	// SubjectAssets asks any coordinator for the JetStream assets of the
	// cluster's account, counted by kind (Assets).
	SubjectAssets = "formica.assets.list"
	// SubjectApprovalDecide takes a person's decision on a held approval
	// (client → coordinator): the only way decisions enter, so coordinators
	// alone write the approvals bucket. Coordinators share it in a queue group.
	SubjectApprovalDecide = "formica.approvals.decide"
	// EventsAll matches every run's events.
	EventsAll = "formica.events.>"
)

// ExecInboxPrefix roots the reply subjects of a coordinator's placements:
// workers may publish there (their results carry the placement's token),
// and nowhere else in a coordinator's inboxes.
const ExecInboxPrefix = "_FORMICA.exec"

// Worker-sent subjects end in the sending worker's id, and a worker's
// credentials allow it to publish only subjects ending in its own id: that
// last token is who sent the message. A coordinator serves them with "*"
// there (AnyWorker) and reads the sender back with SenderOf.

// AnyWorker stands for the worker token when subscribing.
const AnyWorker = "*"

// SubjectWorkerHeartbeat is where worker id announces itself.
func SubjectWorkerHeartbeat(worker string) string { return "formica.workers.hb." + worker }

// SubjectSpawn is where a coordinator takes the spawn requests a worker
// sends for threads of the coordinator's runs.
func SubjectSpawn(coordinator, worker string) string {
	return "formica.coord." + coordinator + ".spawn." + worker
}

// SubjectApproval is where a coordinator takes a worker's approval requests.
func SubjectApproval(coordinator, worker string) string {
	return "formica.coord." + coordinator + ".approval." + worker
}

// SenderOf returns the last token of a worker-sent subject: the worker.
func SenderOf(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return ""
}

// SubjectBudget is where a coordinator renews the budget grants a worker
// asks for, for threads of the coordinator's runs.
func SubjectBudget(coordinator, worker string) string {
	return "formica.coord." + coordinator + ".budget." + worker
}

// SubjectQuota is where a coordinator holding the model endpoints' quotas
// takes a worker's asks for a share of one (QuotaTake) and their ends
// (QuotaDone).
func SubjectQuota(coordinator, worker string) string {
	return "formica.coord." + coordinator + ".quota." + worker
}

// SubjectPlacement is where a coordinator answers a worker that asks
// whether its placement of a thread is still current.
func SubjectPlacement(coordinator, worker string) string {
	return "formica.coord." + coordinator + ".placement." + worker
}

// WorkerSubjectPrefix roots the subjects a worker serves
// (formica.worker.<id>.exec, .cancel, .status).
const WorkerSubjectPrefix = "formica.worker."

// SubjectExec is a worker's own subject for placed threads.
func SubjectExec(worker string) string { return WorkerSubjectPrefix + worker + ".exec" }

// SubjectCancel is a worker's own subject for cancelling threads.
func SubjectCancel(worker string) string { return WorkerSubjectPrefix + worker + ".cancel" }

// WorkerUnder is the worker whose subjects under prefix (WorkerSubjectPrefix
// or WorkerInboxPrefix) subject is one of, or "" when it is none.
func WorkerUnder(prefix, subject string) string {
	if rest, ok := strings.CutPrefix(subject, prefix); ok {
		if id, _, ok := strings.Cut(rest, "."); ok {
			return id
		}
	}
	return ""
}

// SubjectEvents is where one run's events are published; the event type
// follows, so SubjectEvents(run)+".>" follows the whole tree.
func SubjectEvents(run string) string { return subjectEvents + run }

const subjectEvents = "formica.events."

// Header names carried on every message that concerns a run or thread.
const (
	HeaderType   = "Formica-Type"
	HeaderRun    = "Formica-Run"
	HeaderThread = "Formica-Thread"
	// HeaderErrorCode carries an error reply's code (ErrorMsg).
	HeaderErrorCode = "Formica-Error"
)

// SubjectThreadCancel is where a coordinator takes a worker's requests to
// cancel helpers of its placed threads (a parent cancelled on the worker).
func SubjectThreadCancel(coordinator, worker string) string {
	return "formica.coord." + coordinator + ".cancel." + worker
}

// Inbox roots an approver subject may be under: a client's own inbox
// (_FORMICA.client.<id>, see package auth), or the default inbox of a
// connection without credentials.
const (
	ClientInboxPrefix  = "_FORMICA.client."
	DefaultInboxPrefix = "_INBOX."
)

// WorkerInboxPrefix roots a worker's reply subjects (_FORMICA.worker.<id>,
// see package auth): whatever a coordinator sends there is for that worker.
const WorkerInboxPrefix = "_FORMICA.worker."

// ValidApprover reports whether subject may answer a run's `ask` decisions
// (RunSubmit.Approver): empty, or one literal subject in a client's inbox,
// where the submitter serves it. A coordinator sends approval requests
// nowhere else, so a submission cannot make it publish on a bucket's,
// stream's or worker's subject.
func ValidApprover(subject string) bool {
	if subject == "" {
		return true
	}
	if !strings.HasPrefix(subject, ClientInboxPrefix) && !strings.HasPrefix(subject, DefaultInboxPrefix) {
		return false
	}
	for _, tok := range strings.Split(subject, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return len(subject) <= 256
}
