package service

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
)

// apiWithRuns serves the HTTP API over a store holding n run records.
func apiWithRuns(b *testing.B, n int) *httptest.Server {
	b.Helper()
	srv := brokertest.Start(b, brokertest.WithoutListener())
	nc, err := srv.Connect("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	// Fill the store, 16 writers at a time.
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range ids {
				r := record.Run{RunID: fmt.Sprintf("run-%06d", i), Status: event.Succeeded, Task: "Plan a launch:\n- a\n- b",
					Output: "a: done: a\nb: done: b", CreatedAt: time.Now()}
				if _, err := st.CreateRecord(ctx, r); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	svc, err := New(Config{Conn: nc, Store: st})
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
	return hs
}

// BenchmarkListRunsAndReadyz is GET /v1/runs?limit=50 and GET /readyz
// against 20 and 20,000 stored runs: neither reads more records with more
// runs (see BENCHMARKS.md).
func BenchmarkListRunsAndReadyz(b *testing.B) {
	for _, n := range []int{20, 20_000} {
		hs := apiWithRuns(b, n)
		for _, path := range []string{"/v1/runs?limit=50", "/readyz"} {
			b.Run(fmt.Sprintf("runs=%d%s", n, path), func(b *testing.B) {
				for b.Loop() {
					req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
					req.Host = "localhost"
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("%s: %d", path, resp.StatusCode)
					}
				}
			})
		}
	}
}
