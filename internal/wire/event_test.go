package wire

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
)

// TestEventMessageCarriesOnlyItsContentType: an event message is its JSON
// and one header, the content type; no type header (the transport adds one
// for a typed message), nor run or thread headers, which readers would
// parse and the events stream keep with every event.
func TestEventMessageCarriesOnlyItsContentType(t *testing.T) {
	e := event.Event{Type: event.ModelCall, RunID: "r1", ThreadID: "t1"}
	data, err := event.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	m := EventMessage(data)
	if m.Type != "" {
		t.Errorf("type %q, want none", m.Type)
	}
	if d := cmp.Diff(map[string]string{"Content-Type": "application/json"}, m.Header); d != "" {
		t.Errorf("headers (-want +got)\n%s", d)
	}
	if string(m.Data) != string(data) {
		t.Errorf("data %q, want %q", m.Data, data)
	}
}

func TestEventSubject(t *testing.T) {
	e := event.Event{Type: event.ThreadStarted, RunID: "r1"}
	if got, want := EventSubject(e), SubjectEvents("r1")+".thread.started"; got != want {
		t.Errorf("EventSubject = %q, want %q", got, want)
	}
	if got, want := EventSubject(event.Event{Type: event.WorkerLost}), SubjectEvents(ClusterRun)+".worker.lost"; got != want {
		t.Errorf("cluster event subject = %q, want %q", got, want)
	}
	// Every published event builds its subject: one allocation, the string.
	if n := testing.AllocsPerRun(100, func() { _ = EventSubject(e) }); n > 1 {
		t.Errorf("EventSubject allocates %v times, want 1", n)
	}
}
