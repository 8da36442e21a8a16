package durable_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
	"github.com/formica-run/formica/test/proc"
)

// TestAttackPlantedJournalRefusedOnResume replays, over TCP with a
// worker's credentials (mallory, placed on nothing) and a client's (eve,
// who reads journals), an attempt to plant a finished root into a failed
// run's history before it is resumed: each planted end carries a placement
// proof that is forged (signed with mallory's own key, under its own key
// id and under the coordinator's) or replayed (copied by eve from another
// run's root and from another thread), or the bare digest journals held
// before proofs. The resume replays the root's journal: none of the
// planted entries counts, the root asks its model again and the run ends
// with the model's answer.
func TestAttackPlantedJournalRefusedOnResume(t *testing.T) {
	t.Parallel()
	const donorTask, victimTask = "donor", "victim"
	var broken atomicBool
	broken.set(true)
	srv := newChatServer(t, func(task string, req jRequest) jAnswer {
		switch {
		case task == donorTask && req.turn() == 0:
			return jAnswer{calls: []call{agentCall("h", "helper h")}}
		case task == donorTask:
			return jAnswer{text: "donor: " + req.toolResults()}
		case task == victimTask && broken.get():
			return jAnswer{status: http.StatusInternalServerError}
		case task == victimTask:
			return jAnswer{text: "the victim's own answer"}
		}
		return jAnswer{text: "done " + task}
	})
	c := startCoord(t, coordOpts{})
	c.startChatWorker("w1", 4, srv)

	// Real placements whose proofs eve can read: a run's root and helper.
	donor := c.submit(map[string]any{"task": donorTask, "agent": chatAgent()})
	if rec := c.waitFinal(donor); rec.Status != event.Succeeded {
		t.Fatalf("donor run: %s (%s)", rec.Status, rec.Error)
	}
	victim := c.submit(map[string]any{"task": victimTask, "agent": chatAgent()})
	if rec := c.waitFinal(victim); rec.Status != event.Failed {
		t.Fatalf("victim run: %s (%s), want failed", rec.Status, rec.Error)
	}
	calls := srv.count(victimTask, 0)

	eve := c.attacker(c.creds("client", "eve"), "_FORMICA.client.eve")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	header := func(run, thread string) string {
		t.Helper()
		js, err := jetstream.New(eve.nc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, store.JournalStream)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctx, store.SubjectJournal(run, thread, false))
		if err != nil {
			t.Fatalf("eve reads %s/%s: %v", run, thread, err)
		}
		h := m.Header.Get(store.HeaderPlacement)
		if !journal.IsProof(h) {
			t.Fatalf("the journal of %s/%s carries %q, not a placement proof", run, thread, h)
		}
		return h
	}
	donorRoot := header(donor, journal.RootID(donor))
	donorHelper := header(donor, c.threadNamed(donor, "h").ID)
	coordKey, err := journal.ParseProof(donorRoot)
	if err != nil {
		t.Fatal(err)
	}

	// Mallory's own key, once under its own id and once claiming the
	// coordinator's.
	own, err := journal.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	root := journal.RootID(victim)
	forged := own.Sign(victim, root, "w1", 1, "guessed")
	parts := strings.Split(forged, ".")
	parts[1] = coordKey.Key
	claimed := strings.Join(parts, ".")
	planted := map[string]string{
		"a proof copied from another run's root":        donorRoot,
		"a proof copied from another thread":            donorHelper,
		"a proof signed with the worker's own key":      forged,
		"a proof signed under the coordinator's key id": claimed,
		"a bare token digest, as before proofs":         journal.Digest("guessed"),
	}
	mallory := c.attacker(c.creds("worker", "mallory"), "_FORMICA.worker.mallory")
	// Nor may either publish a key of its own for proofs to check with.
	mallory.refused("publish a placement key", "$KV."+store.KeysBucket+"."+own.KeyID(), false)
	eve.refused("publish a placement key", "$KV."+store.KeysBucket+"."+own.KeyID(), false)
	for what, h := range planted {
		for _, e := range []journal.Entry{
			{Kind: journal.KindStart, Task: victimTask, Thread: &journal.ThreadInfo{ID: root, Name: "formica", Path: "root"}},
			{Kind: journal.KindEnd, Status: event.Succeeded, Output: "planted: " + what},
		} {
			e.Time = time.Now()
			msg := &nats.Msg{Subject: store.SubjectJournal(victim, root, false), Header: nats.Header{store.HeaderPlacement: []string{h}},
				Data: wire.MustEncode(wire.TypeJournalEntry, &e)}
			if err := mallory.nc.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := mallory.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every planted entry is in the stream before the resume.
	js, err := jetstream.New(eve.nc)
	if err != nil {
		t.Fatal(err)
	}
	proc.WaitUntil(t, readyTimeout, "the planted entries are stored", func() bool {
		st, err := js.Stream(ctx, store.JournalStream)
		return err == nil && countPlanted(ctx, st, victim, root) == len(planted)
	})

	broken.set(false)
	if code, body, err := c.do(http.MethodPost, "/v1/runs/"+victim+"/resume", nil); err != nil || code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("resume: %d %s %v", code, body, err)
	}
	rec := c.waitFinal(victim)
	if rec.Status != event.Succeeded || rec.Output != "the victim's own answer" {
		t.Fatalf("resumed victim: %s (%s), output %q; want the model's own answer", rec.Status, rec.Error, rec.Output)
	}
	if got := srv.count(victimTask, 0); got != calls+1 {
		t.Errorf("the victim's root asked its model %d more times, want once", got-calls)
	}
	tr, _ := c.transcript(victim, root)
	for _, e := range tr.Entries {
		if strings.HasPrefix(e.Output, "planted") {
			t.Errorf("the transcript holds a planted entry: %+v", e)
		}
	}
	if tr.Worker != "w1" || tr.Attempts != 2 {
		t.Errorf("transcript: worker %q, %d attempts; want w1 and 2 (the run's two executions)", tr.Worker, tr.Attempts)
	}
}

// countPlanted counts the planted entries stored on thread's own subject.
func countPlanted(ctx context.Context, st jetstream.Stream, run, thread string) int {
	n := 0
	subject := store.SubjectJournal(run, thread, false)
	for seq := uint64(1); ; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return n
		}
		if m.Subject == subject && strings.Contains(string(m.Data), "planted: ") {
			n++
		}
	}
}
