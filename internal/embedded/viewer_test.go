package embedded

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// TestViewerReadsOnly: an operator's viewer credential, on the secured
// stack (operator mode), does what `nats stream ls|info`, `kv ls|info`,
// `object ls|info` and `micro ls|info|stats` do — JetStream's account
// info, the stream names, list and infos, the KV and object stores
// among them, and the workers' micro services by ping, info and stats —
// and follows formica.events.>; everything else is refused: requests to
// the coordinators, consumers, message and direct gets, KV and object
// writes, purges and deletes, and subscriptions beyond the events and
// its own inbox.
func TestViewerReadsOnly(t *testing.T) {
	s, cl := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	nc, errs := refusals(t, s, auth.Viewer, "ops")
	if !strings.HasPrefix(nc.NewInbox(), auth.InboxPrefix(auth.Viewer, "ops")+".") {
		t.Fatalf("inbox %s", nc.NewInbox())
	}

	events, err := nc.SubscribeSync(wire.EventsAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	runAsync(t, ctx, cl, simSubmit(t, "Plan:\n- a", 0, limits.Config{}), nil)()
	if _, err := events.NextMsg(10 * time.Second); err != nil {
		t.Errorf("no event on %s: %v", wire.EventsAll, err)
	}

	// JetStream: what the nats CLI's listings and infos ask.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Errorf("account info: %v", err)
	}
	var names []string
	sn := js.StreamNames(ctx)
	for n := range sn.Name() {
		names = append(names, n)
	}
	if err := sn.Err(); err != nil {
		t.Errorf("stream names: %v", err)
	}
	for _, want := range []string{store.EventsStream, "KV_" + store.RunsBucket, "OBJ_" + store.PayloadsBucket} {
		if !slices.Contains(names, want) {
			t.Errorf("stream names %v lack %s", names, want)
		}
	}
	listed := 0
	sl := js.ListStreams(ctx)
	for range sl.Info() {
		listed++
	}
	if err := sl.Err(); err != nil || listed != len(names) {
		t.Errorf("stream list: %d streams, %v; want %d", listed, err, len(names))
	}
	if st, err := js.Stream(ctx, store.EventsStream); err != nil {
		t.Errorf("stream info: %v", err)
	} else if _, err := st.Info(ctx); err != nil {
		t.Errorf("stream info: %v", err)
	} else {
		cons := st.ListConsumers(ctx)
		for range cons.Info() {
		}
		if err := cons.Err(); err != nil {
			t.Errorf("consumer list: %v", err)
		}
	}
	var kvs []string
	kn := js.KeyValueStoreNames(ctx)
	for n := range kn.Name() {
		kvs = append(kvs, n)
	}
	if kn.Error() != nil || !slices.Contains(kvs, store.RunsBucket) {
		t.Errorf("kv ls: %v, %v", kvs, kn.Error())
	}
	if kv, err := js.KeyValue(ctx, store.RunsBucket); err != nil {
		t.Errorf("kv info: %v", err)
	} else if _, err := kv.Status(ctx); err != nil {
		t.Errorf("kv info: %v", err)
	}
	var objs []string
	on := js.ObjectStoreNames(ctx)
	for n := range on.Name() {
		objs = append(objs, n)
	}
	if on.Error() != nil || !slices.Contains(objs, store.PayloadsBucket) {
		t.Errorf("object ls: %v, %v", objs, on.Error())
	}
	if ob, err := js.ObjectStore(ctx, store.PayloadsBucket); err != nil {
		t.Errorf("object info: %v", err)
	} else if _, err := ob.Status(ctx); err != nil {
		t.Errorf("object info: %v", err)
	}

	// Micro discovery: each of the stack's workers answers.
	for _, verb := range []string{"PING", "INFO", "STATS"} {
		for _, subject := range []string{"$SRV." + verb, "$SRV." + verb + ".formica-worker"} {
			inbox := nc.NewInbox()
			replies, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.PublishRequest(subject, inbox, nil); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				m, err := replies.NextMsg(10 * time.Second)
				if err != nil {
					t.Fatalf("%s: reply %d: %v", subject, i+1, err)
				}
				var svc struct {
					Name string `json:"name"`
				}
				if json.Unmarshal(m.Data, &svc) != nil || svc.Name != "formica-worker" {
					t.Errorf("%s: %s", subject, m.Data)
				}
			}
			replies.Unsubscribe()
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("refused a read: %v", err)
	default:
	}

	// Refused.
	consumer, _ := json.Marshal(map[string]any{"stream_name": store.EventsStream,
		"config": map[string]any{"name": "peek", "deliver_subject": nc.NewInbox(), "ack_policy": "none"}})
	for _, p := range []struct{ subject, body string }{
		{wire.SubjectSubmit, "{}"},
		{wire.SubjectEnqueue, "{}"},
		{wire.SubjectWorkers, ""},
		{wire.SubjectCancelRequest, "{}"},
		{wire.SubjectApprovalDecide, "{}"},
		{"formica.events.r1.x", "{}"},
		{"$JS.API.CONSUMER.CREATE." + store.EventsStream + ".peek", string(consumer)},
		{"$JS.API.CONSUMER.DURABLE.CREATE." + store.EventsStream + ".peek", string(consumer)},
		{"$JS.API.DIRECT.GET." + store.EventsStream, `{"seq":1}`},
		{"$JS.API.DIRECT.GET." + "KV_" + store.RunsBucket + ".$KV." + store.RunsBucket + ".x", ""},
		{"$JS.API.STREAM.MSG.GET." + store.EventsStream, `{"seq":1}`},
		{"$KV." + store.RunsBucket + ".x", "{}"},
		{"$O." + store.PayloadsBucket + ".C.x", "x"},
		{"$JS.API.STREAM.PURGE." + store.EventsStream, ""},
		{"$JS.API.STREAM.DELETE." + store.EventsStream, ""},
		{"$JS.API.STREAM.MSG.DELETE." + store.EventsStream, `{"seq":1}`},
		{"$JS.API.STREAM.CREATE.VIEWER", `{"name":"VIEWER","subjects":["viewer.>"]}`},
	} {
		if err := nc.PublishRequest(p.subject, nc.NewInbox(), []byte(p.body)); err != nil {
			t.Fatal(err)
		}
		awaitRefusal(t, errs, "publish on "+p.subject)
	}
	for _, subject := range []string{"_INBOX.>", "formica.stored.>", "formica.>", "$KV.>", "_FORMICA.client.ops.>"} {
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		awaitRefusal(t, errs, "subscribe to "+subject)
	}
	// Through the library too: a KV put, ended by its refusal.
	if kv, err := js.KeyValue(ctx, store.RunsBucket); err == nil {
		pctx, stop := context.WithTimeout(ctx, 2*time.Second)
		_, err := kv.Put(pctx, "x", []byte("{}"))
		stop()
		if err == nil {
			t.Error("kv put: written")
		}
		awaitRefusal(t, errs, "kv put")
	}
	// Nothing was made.
	cjs, _ := jetstream.New(mustConn(t, s, "coordinator-view"))
	if st, err := cjs.Stream(ctx, store.EventsStream); err != nil || st.CachedInfo().State.Consumers != 0 {
		t.Errorf("events stream: %v consumers, %v", st.CachedInfo().State.Consumers, err)
	}
	if _, err := cjs.Stream(ctx, "VIEWER"); err == nil {
		t.Error("the viewer made a stream")
	}
}

// TestViewerNatsCLI drives the nats CLI itself (`nats` on PATH, or the
// binary $FORMICA_NATS_CLI names; skipped without one) with a viewer's
// credentials file and --inbox-prefix _FORMICA.viewer.ops over TCP: the
// read commands docs/security.md lists succeed and name what the stack
// has, with no permission violation; the commands that read contents or
// write are refused.
func TestViewerNatsCLI(t *testing.T) {
	bin := os.Getenv("FORMICA_NATS_CLI")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nats"); err != nil {
			t.Skip("no nats CLI on PATH (or $FORMICA_NATS_CLI)")
		}
	}
	s, cl := startSecuredWith(t, func(c *Config) { c.Server.Listen = "127.0.0.1:-1" })
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	creds, err := s.authority.Issue(auth.Viewer, "ops")
	if err != nil {
		t.Fatal(err)
	}
	data, err := creds.File()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ops.creds")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--server", s.Server.ClientURL(), "--creds", file,
		"--inbox-prefix", auth.InboxPrefix(auth.Viewer, "ops"), "--timeout", "3s", "--no-context"}
	nats := func(args ...string) (string, error) {
		cctx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		out, err := exec.CommandContext(cctx, bin, append(slices.Clone(base), args...)...).CombinedOutput()
		return string(out), err
	}
	runAsync(t, ctx, cl, simSubmit(t, "Plan:\n- a", 0, limits.Config{}), nil)()

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"account", "info"}, []string{"Account Information"}},
		{[]string{"stream", "ls"}, []string{store.EventsStream, store.JournalStream}},
		{[]string{"stream", "info", store.EventsStream}, []string{store.EventsStream}},
		{[]string{"kv", "ls"}, []string{store.RunsBucket, store.ApprovalsBucket}},
		{[]string{"kv", "info", store.RunsBucket}, []string{store.RunsBucket}},
		{[]string{"object", "ls"}, []string{store.PayloadsBucket}},
		{[]string{"object", "info", store.PayloadsBucket}, []string{store.PayloadsBucket}},
		{[]string{"micro", "ls"}, []string{"formica-worker"}},
		{[]string{"micro", "info", "formica-worker"}, []string{"formica-worker"}},
		{[]string{"micro", "stats", "formica-worker"}, []string{"formica-worker"}},
		{[]string{"consumer", "ls", store.EventsStream}, nil},
	} {
		out, err := nats(c.args...)
		if err != nil || strings.Contains(strings.ToLower(out), "permissions violation") {
			t.Errorf("nats %s: %v\n%s", strings.Join(c.args, " "), err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("nats %s does not name %s:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}

	// Placements go through the workers' micro services, so micro stats
	// counts them: the run above placed its root and its helper.
	out, err := nats("micro", "stats", "formica-worker", "--json")
	var stats []struct {
		Endpoints []struct {
			Name        string `json:"name"`
			NumRequests int    `json:"num_requests"`
		} `json:"endpoints"`
	}
	if err != nil || json.Unmarshal([]byte(out), &stats) != nil {
		t.Errorf("nats micro stats --json: %v\n%s", err, out)
	}
	placements := 0
	for _, st := range stats {
		for _, e := range st.Endpoints {
			if e.Name == "exec" {
				placements += e.NumRequests
			}
		}
	}
	if placements < 2 {
		t.Errorf("micro stats counts %d placements (exec requests), want the run's 2 at least:\n%s", placements, out)
	}

	// The events, live.
	sub := make(chan string, 1)
	go func() {
		out, err := nats("sub", wire.EventsAll, "--count", "1")
		if err != nil {
			out += err.Error()
		}
		sub <- out
	}()
	// Runs until the CLI, subscribed whenever it got there, has seen one's
	// events.
	out = ""
	for out == "" {
		runAsync(t, ctx, cl, simSubmit(t, "Plan:\n- b", 0, limits.Config{}), nil)()
		select {
		case out = <-sub:
		case <-time.After(time.Second):
		case <-ctx.Done():
			t.Fatal("nats sub received no event")
		}
	}
	if !strings.Contains(out, "formica.events.") || strings.Contains(strings.ToLower(out), "permissions violation") {
		t.Errorf("nats sub %s:\n%s", wire.EventsAll, out)
	}

	for _, args := range [][]string{
		{"kv", "ls", store.RunsBucket},
		{"kv", "get", store.RunsBucket, "x"},
		{"kv", "put", store.RunsBucket, "x", "y"},
		{"object", "ls", store.PayloadsBucket},
		{"stream", "get", store.EventsStream, "1"},
		{"consumer", "add", store.EventsStream, "c1", "--pull", "--defaults"},
		{"stream", "purge", store.EventsStream, "-f"},
		{"stream", "rm", store.EventsStream, "-f"},
		{"req", wire.SubjectWorkers, "{}"},
		{"pub", wire.SubjectSubmit, "{}"},
	} {
		out, _ := nats(args...)
		if !strings.Contains(strings.ToLower(out), "permissions violation") {
			t.Errorf("nats %s: not refused:\n%s", strings.Join(args, " "), out)
		}
	}
	cjs, _ := jetstream.New(mustConn(t, s, "coordinator-view"))
	if st, err := cjs.Stream(ctx, store.EventsStream); err != nil || st.CachedInfo().State.Consumers != 0 || st.CachedInfo().State.Msgs == 0 {
		t.Errorf("events stream after the refusals: %v", err)
	}
}
