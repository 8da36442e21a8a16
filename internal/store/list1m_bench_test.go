package store_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
)

// records1M is how many run records BenchmarkListPage1M stores.
const records1M = 1_000_000

// asked1M reports whether the benchmark of 1,000,000 records was asked
// for: by name in -bench, or with FORMICA_BENCH_1M=1. Writing them takes a
// minute or two, so -bench . alone does not run it.
func asked1M() bool {
	if os.Getenv("FORMICA_BENCH_1M") == "1" {
		return true
	}
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), "1M")
}

// status1M is the status of the i-th run stored: 1 in 10 failed, 1 in
// 1,000 cancelled, 1 in 10,000 running, the rest succeeded.
func status1M(i int) event.Status {
	switch {
	case i%10_000 == 5:
		return event.Running
	case i%1000 == 7:
		return event.Cancelled
	case i%10 == 3:
		return event.Failed
	}
	return event.Succeeded
}

// fill1M stores n run records and their index entries, as CreateRecord
// does (a record under its key in the runs bucket, then its id on the run
// index), with pipelined publishes.
func fill1M(b *testing.B, ctx context.Context, js jetstream.JetStream, n int) {
	b.Helper()
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	pending := 0
	wait := func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
		pending = 0
	}
	publish := func(subject string, data []byte) {
		for {
			if _, err := js.PublishAsync(subject, data); err == nil {
				break
			} else if err != jetstream.ErrTooManyStalledMsgs {
				b.Fatal(err)
			}
			wait()
		}
		if pending++; pending == 16_384 {
			wait()
		}
	}
	for i := range n {
		id := fmt.Sprintf("run-%07d", i)
		at := created.Add(time.Duration(i) * time.Second)
		fin := at.Add(90 * time.Second)
		r := record.Run{RunID: id, Status: status1M(i), Task: "Plan a launch:\n- write the announcement\n- update the docs",
			Output: "announcement: done\ndocs: done", Attempts: 1, CreatedAt: at, StartedAt: at, FinishedAt: fin,
			Threads: []record.Thread{{ID: id + "-root", Name: "formica", Status: status1M(i), Worker: "w1"}}}
		if r.Status == event.Running {
			r.FinishedAt = time.Time{}
		}
		val, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		idx, _ := json.Marshal(map[string]string{"run_id": id})
		publish("$KV."+store.RunsBucket+"."+id, val)
		publish(store.SubjectIndex, idx)
	}
	wait()
}

// BenchmarkListPage1M pages through the runs of a store of 1,000,000
// run records, newest first, with and without a status filter: through
// store.ListPage, and through the HTTP API (GET /v1/runs?limit=50&status=S,
// its cursor followed). A page costs what it reads, whatever the number of
// stored runs: see BENCHMARKS.md. Each iteration is one page, the next
// one after the last (back to the newest at the end).
func BenchmarkListPage1M(b *testing.B) {
	if !asked1M() {
		b.Skip("stores 1,000,000 run records: run with -bench ListPage1M (or FORMICA_BENCH_1M=1)")
	}
	srv := brokertest.Start(b)
	nc, err := srv.Connect("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(32_768))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	fill1M(b, ctx, js, records1M)
	idx, err := js.Stream(ctx, store.IndexStream)
	if err != nil {
		b.Fatal(err)
	}
	if n := idx.CachedInfo().State.Msgs; n != records1M {
		b.Fatalf("the run index holds %d entries, want %d", n, records1M)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("stored %d records and index entries in %v; heap in use (NATS server included) %d MiB",
		records1M, time.Since(start).Round(time.Second), ms.HeapInuse>>20)

	statuses := []event.Status{"", event.Succeeded, event.Failed, event.Running}
	for _, status := range statuses {
		name := "status=" + string(status)
		if status == "" {
			name = "status=any"
		}
		b.Run("store/"+name, func(b *testing.B) {
			b.ReportAllocs()
			page, runs, pages := "", 0, 0
			for b.Loop() {
				p, err := st.ListPage(ctx, store.ListOptions{Status: status, Limit: 50, Page: page})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range p.Runs {
					if status != "" && r.Status != status {
						b.Fatalf("run %s is %s, listed as %s", r.RunID, r.Status, status)
					}
				}
				runs, pages, page = runs+len(p.Runs), pages+1, p.Next
			}
			b.ReportMetric(float64(runs)/float64(pages), "runs/page")
		})
	}

	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	a, err := api.New(api.Config{}, svc)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	b.Cleanup(hs.Close)
	for _, status := range statuses {
		path := "/v1/runs?limit=50"
		if status != "" {
			path += "&status=" + string(status)
		}
		b.Run("http"+strings.TrimPrefix(path, "/v1/runs"), func(b *testing.B) {
			b.ReportAllocs()
			next, runs, pages := path, 0, 0
			for b.Loop() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+next, nil)
				req.Host = "localhost"
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var list []record.Run
				err = json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d %v", next, resp.StatusCode, err)
				}
				runs, pages = runs+len(list), pages+1
				// Link: </v1/runs?limit=N&page=CURSOR&status=S>; rel="next"
				next = path
				if l := resp.Header.Get("Link"); l != "" {
					next = l[1:strings.Index(l, ">")]
				}
			}
			b.ReportMetric(float64(runs)/float64(pages), "runs/page")
		})
	}
}
