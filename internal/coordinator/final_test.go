package coordinator

import (
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// A run whose cancel was answered while it ran does not end succeeded,
// even when its root finished before the cancel reached it; a run that
// failed keeps its own reason.
func TestFinalHonoursAnsweredCancel(t *testing.T) {
	c := &Coordinator{cfg: Config{Now: func() time.Time { return time.Unix(100, 0) }}}
	for _, tc := range []struct {
		ended      event.Status
		asked      string
		want       event.Status
		wantReason string
	}{
		{event.Succeeded, CancelledByUser, event.Cancelled, CancelledByUser},
		{event.Succeeded, "", event.Succeeded, ""},
		{event.Failed, CancelledByUser, event.Failed, "boom"},
	} {
		stored := record.Run{RunID: "r1", Status: event.Running, CancelRequested: tc.asked, Task: "t"}
		ended := record.Run{RunID: "r1", Status: tc.ended, Output: "out"}
		if tc.ended == event.Failed {
			ended.Error = "boom"
		}
		c.final(ended)(&stored)
		if stored.Status != tc.want || stored.Error != tc.wantReason || stored.Task != "t" {
			t.Errorf("ended %s, cancel asked %q: stored %s %q (task %q), want %s %q", tc.ended, tc.asked, stored.Status, stored.Error, stored.Task, tc.want, tc.wantReason)
		}
	}
}
