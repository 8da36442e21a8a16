package coordinator

import (
	"testing"

	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// TestSenderOf: a reference may name only the place of the worker a
// message is pinned to by its subject; none on clients' subjects.
func TestSenderOf(t *testing.T) {
	for _, tc := range []struct{ subject, want string }{
		{wire.SubjectSpawn("c1", "w1"), store.WorkerPlace("w1")},
		{wire.SubjectApproval("c1", "gpu-2"), store.WorkerPlace("gpu-2")},
		{wire.SubjectExec("w2"), store.WorkerPlace("w2")},
		{wire.SubjectSpawn("c1", wire.AnyWorker), ""},
		{wire.SubjectSubmit, ""},
		{wire.SubjectEnqueue, ""},
		{wire.SubjectWorkers, ""},
		{wire.SubjectAssets, ""},
		{wire.SubjectApprovalDecide, ""},
		{"_FORMICA.client.eve.abc", ""},
		{"formica.worker.", ""},
		{"formica.coord.c1.spawn", ""},
	} {
		if got := senderOf(tc.subject); got != tc.want {
			t.Errorf("senderOf(%q) = %q, want %q", tc.subject, got, tc.want)
		}
	}
}

// TestRecipientOf: a body sent to a worker, on its subjects or to its
// inbox, goes into the place it reads; any other into the coordinators'
// own.
func TestRecipientOf(t *testing.T) {
	for _, tc := range []struct{ subject, want string }{
		{wire.SubjectExec("w1"), store.ToWorkerPlace("w1")},
		{wire.SubjectCancel("gpu-2"), store.ToWorkerPlace("gpu-2")},
		{wire.WorkerInboxPrefix + "w3.abc.7", store.ToWorkerPlace("w3")},
		{wire.ClientInboxPrefix + "eve.abc.1", ""},
		{"_INBOX.abc.1", ""},
		{wire.SubjectEvents("r1") + ".run.finished", ""},
		{wire.WorkerInboxPrefix, ""},
	} {
		if got := recipientOf(tc.subject); got != tc.want {
			t.Errorf("recipientOf(%q) = %q, want %q", tc.subject, got, tc.want)
		}
	}
}
