package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/wire"
)

// TestJournalThreadLimitRefusesWrites: once a thread's journal holds its
// limit of messages, the next write is refused with journal.ErrLimit and an
// error naming the limit, and every entry stored before it is still there
// (nothing old is dropped to make room). Another thread's journal, and the
// coordinator's subject of the full thread, take writes as before.
func TestJournalThreadLimitRefusesWrites(t *testing.T) {
	s, _ := openStore(t, Config{JournalMaxThreadMsgs: 5})
	ctx := ctxT(t, 20*time.Second)
	run, thread := "run-full", "thread-1"
	w := s.Journal(run, thread, "tok-1", false)
	for i := range 5 {
		w.Append(journal.Entry{Kind: journal.KindTool, CallID: fmt.Sprintf("c%d", i), Result: "ran"})
		if err := w.Sync(ctx); err != nil {
			t.Fatalf("write %d of 5: %v", i+1, err)
		}
	}
	w.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: "one too many"})
	err := w.Sync(ctx)
	if !errors.Is(err, journal.ErrLimit) {
		t.Fatalf("the 6th write: %v, want journal.ErrLimit", err)
	}
	for _, want := range []string{"journal limit reached", thread, "--journal-max-thread-msgs", "maximum messages per subject exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The first five are all kept.
	st, err := s.js.Stream(ctx, JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 5} {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || m.Subject != SubjectJournal(run, thread, false) {
			t.Fatalf("message %d: %v %v; want the thread's", seq, m, err)
		}
	}
	// Others still write.
	other := s.Journal(run, "thread-2", "tok-2", false)
	other.Append(journal.Entry{Kind: journal.KindStart, Task: "other"})
	if err := other.Sync(ctx); err != nil {
		t.Errorf("another thread's write: %v", err)
	}
	coord := s.Journal(run, thread, "", true)
	coord.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Failed, Error: "lost"})
	if err := coord.Sync(ctx); err != nil {
		t.Errorf("the coordinator's write on the full thread: %v", err)
	}
}

// TestJournalMessageSizeLimit: on a server whose max payload is larger
// than a journal message may be, a writer still sends no message over
// JournalMaxMsgBytes (a larger entry goes by reference), and a message over
// it published by hand is refused with journal.ErrLimit's text.
func TestJournalMessageSizeLimit(t *testing.T) {
	srv := brokertest.Start(t, brokertest.WithConfig(func(c *broker.ServerConfig) { c.MaxPayload = 8 << 20 }))
	nc := connect(t, srv)
	ctx := ctxT(t, 20*time.Second)
	s, err := Open(ctx, nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := OpenTransfers(ctx, nc, "w1", Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, thread := "run-big", "thread-1"
	big := strings.Repeat("y", 3<<20)
	w := ws.Journal(run, thread, "tok-1", false).Batched(time.Hour)
	w.Append(journal.Entry{Kind: journal.KindStart, Task: "do it"})
	w.Append(journal.Entry{Kind: journal.KindModel, Message: &model.Message{Role: model.RoleAssistant, Content: big}})
	if err := w.Sync(ctx); err != nil {
		t.Fatalf("a 3 MiB entry: %v", err)
	}
	st, err := s.js.Stream(ctx, JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.Config.MaxMsgSize != JournalMaxMsgBytes {
		t.Fatalf("journal stream max message size: %v %v", info, err)
	}
	for seq := uint64(1); ; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > JournalMaxMsgBytes {
			t.Errorf("message %d holds %d bytes, over the journal's %d", seq, len(m.Data), JournalMaxMsgBytes)
		}
	}

	js, _ := jetstream.New(nc)
	_, err = js.PublishMsg(ctx, &nats.Msg{Subject: SubjectJournal(run, thread, false), Data: []byte(big)})
	if werr := journalWriteError(run, thread, err); !errors.Is(werr, journal.ErrLimit) || !strings.Contains(werr.Error(), "larger than the journal takes") {
		t.Errorf("a 3 MiB message published by hand: %v, want a refusal for its size", werr)
	}
}

// TestOpenKeepsStoredJournals: a deployment whose journal stream had no
// per-thread limit is updated by Open without losing an entry: with a
// thread's journal already past the new limit, the limit stays at what that
// journal holds, and writes past it are refused; a stream with no journal
// that full gets the limit as asked, and Open again changes nothing.
func TestOpenKeepsStoredJournals(t *testing.T) {
	srv := brokertest.Start(t)
	nc := connect(t, srv)
	ctx := ctxT(t, 30*time.Second)
	js, _ := jetstream.New(nc)
	old := journalStreamConfig(Config{Replicas: 1, JournalMaxAge: time.Hour})
	old.Discard, old.DiscardNewPerSubject, old.MaxMsgsPerSubject, old.MaxMsgSize = jetstream.DiscardOld, false, 0, 0
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	subject := SubjectJournal("run-old", "thread-1", false)
	for i := range 12 {
		if _, err := js.Publish(ctx, subject, wire.MustEncode(wire.TypeJournalEntry, &journal.Entry{Kind: journal.KindTool, CallID: fmt.Sprint(i)})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, SubjectJournal("run-old", "thread-2", false), []byte("x")); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, nc, Config{JournalMaxThreadMsgs: 5})
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	if c := info.Config; c.MaxMsgsPerSubject != 12 || c.Discard != jetstream.DiscardNew || !c.DiscardNewPerSubject || c.MaxMsgSize != JournalMaxMsgBytes {
		t.Fatalf("updated stream: %d per subject, discard %v (per subject %v), max message %d; want 12, new, true, %d",
			c.MaxMsgsPerSubject, c.Discard, c.DiscardNewPerSubject, c.MaxMsgSize, JournalMaxMsgBytes)
	}
	if info.State.Msgs != 13 {
		t.Fatalf("the stream holds %d messages after the update, want all 13", info.State.Msgs)
	}
	w := s.Journal("run-old", "thread-1", "tok", false)
	w.Append(journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded})
	if err := w.Sync(ctx); !errors.Is(err, journal.ErrLimit) {
		t.Errorf("a 13th write on the full journal: %v, want journal.ErrLimit", err)
	}

	// Once no journal is that full (here: purged), Open sets the limit
	// asked for, and again leaves it.
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := Open(ctx, nc, Config{JournalMaxThreadMsgs: 5}); err != nil {
			t.Fatal(err)
		}
		if info, _ := st.Info(ctx); info.Config.MaxMsgsPerSubject != 5 {
			t.Fatalf("per-thread limit %d, want 5", info.Config.MaxMsgsPerSubject)
		}
	}
}

// TestReadRunJournalReadsTheRunsThreadsOnly: entries a worker wrote under
// a run on threads the run does not have are never read, and those it
// wrote on a real thread without a placement that checks are skipped
// unread (a reference they carry is not followed): the bytes a reader
// takes from NATS stay near the run's own, whatever was planted.
func TestReadRunJournalReadsTheRunsThreadsOnly(t *testing.T) {
	srv := brokertest.Start(t)
	nc := connect(t, srv)
	ctx := ctxT(t, 30*time.Second)
	s, err := Open(ctx, nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := OpenTransfers(ctx, nc, "w1", Config{})
	if err != nil {
		t.Fatal(err)
	}
	coord, _ := journal.NewSigner()
	if err := s.PublishPlacementKey(ctx, coord); err != nil {
		t.Fatal(err)
	}
	run := "run-real"
	root := journal.RootID(run)
	child := journal.ThreadID(run, root, journal.CallKey(0, "call_1"))
	write := func(thread string, entries ...journal.Entry) {
		t.Helper()
		w := ws.Journal(run, thread, "tok", false).Proven(coord.Sign(run, thread, "w1", 1, "tok")).Batched(time.Hour)
		for _, e := range entries {
			w.Append(e)
		}
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	write(root,
		journal.Entry{Kind: journal.KindStart, Task: "root", Thread: &journal.ThreadInfo{ID: root, Name: "formica", Path: "root"}},
		journal.Entry{Kind: journal.KindModel, Message: &model.Message{Role: model.RoleAssistant,
			ToolCalls: []model.ToolCall{{ID: "call_1", Name: journal.AgentTool, Arguments: `{"name":"h","task":"t"}`}}}},
		journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: "root done"})
	write(child,
		journal.Entry{Kind: journal.KindStart, Task: "t", Thread: &journal.ThreadInfo{ID: child, ParentID: root, Name: "h", Path: "root/h", Depth: 1}},
		journal.Entry{Kind: journal.KindEnd, Status: event.Succeeded, Output: "child done"})

	// A reader on its own connection, so what it takes from NATS is its own.
	rnc := connect(t, srv)
	rs, err := Open(ctx, rnc, Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	readBytes := func() (int, uint64) {
		t.Helper()
		before := rnc.Stats().InBytes
		got, err := rs.ReadRunJournal(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tj := range got {
			n += len(tj.Entries)
		}
		return n, rnc.Stats().InBytes - before
	}
	entries, clean := readBytes()
	if entries != 5 {
		t.Fatalf("the run's journal: %d entries, want 5 (the root's 3, the helper's 2)", entries)
	}

	// Planted: 8 MiB on threads the run does not have, under a proof of
	// the coordinator's for them (a replayed one would not check anyway),
	// and 2 MiB on the root's own subject under proofs that do not check,
	// one message carrying a reference to a large object.
	junk := strings.Repeat("j", 512<<10)
	for i := range 16 {
		subj := SubjectJournal(run, fmt.Sprintf("invented-%d", i), false)
		if err := nc.PublishMsg(&nats.Msg{Subject: subj, Data: []byte(junk)}); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := ws.PutPayload(ctx, "", []byte(strings.Repeat("r", 4<<20)))
	if err != nil {
		t.Fatal(err)
	}
	planted := []*nats.Msg{
		{Data: []byte(junk), Header: nats.Header{HeaderPlacement: []string{coord.Sign(run, "another", "w1", 1, "x")}}},
		{Data: []byte(junk), Header: nats.Header{HeaderPlacement: []string{journal.Digest("guessed")}}},
		{Data: []byte(junk)},
		{Data: wire.MustEncode(wire.TypeJournalRef, journalRef{Kind: journal.KindEnd, Ref: ref}),
			Header: nats.Header{HeaderPlacement: []string{coord.Sign(run, "another", "w1", 1, "x")}}},
	}
	for _, m := range planted {
		m.Subject = SubjectJournal(run, root, false)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	entries, after := readBytes()
	if entries != 5 {
		t.Errorf("after the planting: %d entries, want the same 5", entries)
	}
	// The planted 1.5 MiB on the root's subject are read (bounded by the
	// thread's limits), the 8 MiB elsewhere and the 4 MiB object are not.
	if extra := after - clean; extra > 2<<20 {
		t.Errorf("the reader took %d bytes more after the planting (%d before), want at most the 1.5 MiB on the root's own subject", extra, clean)
	}
	t.Logf("bytes read: %d clean, %d with 13.5 MiB planted", clean, after)

	// Proofs under 100 keys nobody published: the reader asks for at most
	// maxKeyMisses of them, then reads the published keys once.
	for range 100 {
		other, _ := journal.NewSigner()
		m := &nats.Msg{Subject: SubjectJournal(run, root, false), Data: []byte("x"),
			Header: nats.Header{HeaderPlacement: []string{other.Sign(run, root, "w1", 1, "tok")}}}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	before := rnc.Stats().OutMsgs
	if entries, _ := readBytes(); entries != 5 {
		t.Errorf("after 100 unknown keys: %d entries, want 5", entries)
	}
	// Two subjects per thread, and one batch each; the keys.
	asked := rnc.Stats().OutMsgs - before
	t.Logf("requests for a read with 100 unknown keys: %d", asked)
	if asked > 4+maxKeyMisses+1+4 {
		t.Errorf("the read sent %d requests, want at most %d", asked, 4+maxKeyMisses+1+4)
	}
}

// TestJournalFlushSplitsWithinTheLimits: a batched writer holding more
// than one message takes (thousands of small entries, as a model response
// of thousands of tool calls gives, and large ones among them) sends them
// in as few messages as hold them, each within the journal's message size
// and maxBatch entries, in order, so a turn's entries do not each take one
// of the thread's messages (--journal-max-thread-msgs).
func TestJournalFlushSplitsWithinTheLimits(t *testing.T) {
	const limit = 20
	s, _ := openStore(t, Config{JournalMaxThreadMsgs: limit})
	ctx := ctxT(t, 30*time.Second)
	run, thread := "run-split", "thread-1"
	coord := s.Journal(run, thread, "tok-1", true)
	coord.Append(journal.Entry{Kind: journal.KindPlacement, Worker: "w1", Attempt: 1})
	if err := coord.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w := s.Journal(run, thread, "tok-1", false).Batched(time.Hour)
	const small, every = 3000, 150
	big := strings.Repeat("b", 200<<10)
	want := 0
	for i := range small {
		w.Append(journal.Entry{Kind: journal.KindTool, CallID: fmt.Sprintf("c%d", i), Result: "Error: not run"})
		want++
		if i%every == 0 {
			w.Append(journal.Entry{Kind: journal.KindTool, CallID: fmt.Sprintf("big%d", i), Result: big})
			want++
		}
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatalf("%d entries held, then synced: %v", want, err)
	}
	got, err := s.ReadJournal(ctx, run, thread)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want+1 {
		t.Fatalf("read %d entries, want %d and the placement", len(got), want)
	}
	next := 0
	for _, e := range got[1:] {
		if e.CallID == fmt.Sprintf("c%d", next) {
			next++
		} else if e.CallID != fmt.Sprintf("big%d", next-1) || e.Result != big {
			t.Fatalf("entry %q after c%d: out of order", e.CallID, next-1)
		}
	}
	st, err := s.js.Stream(ctx, JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	msgs := 0
	for seq := uint64(1); ; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != SubjectJournal(run, thread, false) {
			continue
		}
		msgs++
		if size := len(m.Data) + headerBytes(m.Header); size > JournalMaxMsgBytes {
			t.Errorf("message %d holds %d bytes, over the journal's %d", seq, size, JournalMaxMsgBytes)
		}
		var b journalBatch
		if wire.DecodeAs(m.Data, wire.TypeJournalBatch, &b) == nil && len(b.Entries) > maxBatch {
			t.Errorf("message %d holds %d entries, over %d", seq, len(b.Entries), maxBatch)
		}
	}
	// The big entries fill about five to a message; the small ones take
	// maxBatch to a message.
	if msgs > 10 {
		t.Errorf("%d entries went in %d messages, want at most 10", want, msgs)
	}
	t.Logf("%d entries in %d messages", want, msgs)
}

// headerBytes is about what h adds to a message.
func headerBytes(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
