package journal

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// namespace roots every derived id, so they never collide with random ones.
var namespace = uuid.MustParse("6f1c2b1e-6d0a-4f7e-9b55-0c3a8a3f4b21")

// ThreadID is the id of the helper that the parent thread's tool call
// callID starts in run: the same call always maps to the same helper, so a
// parent that is replayed finds its helpers' journals again. callID is
// unique within the parent thread (CallKey).
func ThreadID(run, parent, callID string) string {
	return uuid.NewSHA1(namespace, []byte(run+"\x00"+parent+"\x00"+callID)).String()
}

// HelperID is ThreadID, or newID's when the spawn names no call (a peer
// that sends none).
func HelperID(run, parent, callKey string, newID func() string) string {
	if callKey == "" {
		return newID()
	}
	return ThreadID(run, parent, callKey)
}

// RootID is the id of a run's root thread, the same on every delivery of
// the run.
func RootID(run string) string { return ThreadID(run, "", "root") }

// CallKey names a tool call uniquely within its thread: the model's own
// call ids repeat across turns (call_1, call_2, ... every turn), so the turn
// goes with it.
func CallKey(turn int, callID string) string {
	return strconv.Itoa(turn) + "/" + callID
}

// ParseCallKey splits a CallKey into its turn and the model's call id; a
// key that is not one comes back whole as the id, turn 0.
func ParseCallKey(key string) (turn int, callID string) {
	t, id, ok := strings.Cut(key, "/")
	if !ok {
		return 0, key
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return 0, key
	}
	return n, id
}
