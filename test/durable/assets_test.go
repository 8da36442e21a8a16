package durable_test

import (
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// TestAssetsCommand: `formica assets` (with client credentials), GET
// /v1/assets and the coordinator's gauges report the store's fixed set:
// one stream of each of Formica's kinds, the queue's consumer and the
// coordinator's lease watch, nothing of other kinds.
func TestAssetsCommand(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 2)

	var a wire.Assets
	c.cliJSON(&a, "assets", "--json")
	check := func(where string, a wire.Assets) {
		t.Helper()
		if a.Streams != store.OwnStreams || a.Consumers != 3 || len(a.Kinds) != len(store.AssetKinds) {
			t.Errorf("%s: %d streams, %d consumers, %d kinds; want %d, 3, %d", where, a.Streams, a.Consumers, len(a.Kinds), store.OwnStreams, len(store.AssetKinds))
		}
		for _, k := range a.Kinds {
			want := [2]int{1, 0}
			switch k.Kind {
			case store.KindQueue, store.KindWebhooks, store.KindKVLeases:
				want = [2]int{1, 1}
			case store.KindLegacyTransfers, store.KindOther:
				want = [2]int{}
			}
			if got := [2]int{k.Streams, k.Consumers}; got != want {
				t.Errorf("%s: %s has %d streams, %d consumers; want %v", where, k.Kind, k.Streams, k.Consumers, want)
			}
		}
	}
	check("formica assets --json", a)
	var api wire.Assets
	if code := c.getJSON("/v1/assets", &api); code != 200 {
		t.Errorf("GET /v1/assets: %d", code)
	}
	check("GET /v1/assets", api)

	r := c.cli("assets")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != len(store.AssetKinds)+2 || strings.Join(strings.Fields(lines[0]), " ") != "KIND STREAMS CONSUMERS NAMES" {
		t.Fatalf("formica assets: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rows := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = strings.Join(f[1:], " ")
	}
	for kind, want := range map[string]string{"queue": "1 1 FORMICA_QUEUE", "kv_leases": "1 1 KV_formica_leases",
		"journal": "1 0 FORMICA_JOURNAL", "webhooks": "1 1 FORMICA_WEBHOOKS", "other": "0 0 -", "total": "12 3"} {
		if rows[kind] != want {
			t.Errorf("formica assets row %s: %q, want %q\n%s", kind, rows[kind], want, r.stdout)
		}
	}

	// The gauges show the count the command had made.
	m := scrapeMetrics(t, c.api+"/metrics", c.token)
	for _, k := range a.Kinds {
		if m.series("formica_jetstream_streams", "kind", k.Kind) == nil || m.value("formica_jetstream_streams", "kind", k.Kind) != float64(k.Streams) ||
			m.value("formica_jetstream_consumers", "kind", k.Kind) != float64(k.Consumers) {
			t.Errorf("gauges of %s: %v streams, %v consumers; want %d, %d", k.Kind, m.value("formica_jetstream_streams", "kind", k.Kind),
				m.value("formica_jetstream_consumers", "kind", k.Kind), k.Streams, k.Consumers)
		}
	}
}
