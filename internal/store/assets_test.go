package store

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/wire"
)

// counts is Assets by kind: streams and consumers.
func counts(t *testing.T, s *Store) (map[string][2]int, wire.Assets) {
	t.Helper()
	a, err := s.Assets(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Kinds) != len(AssetKinds) {
		t.Fatalf("%d kinds, want %d: %+v", len(a.Kinds), len(AssetKinds), a.Kinds)
	}
	m := map[string][2]int{}
	streams, consumers := 0, 0
	for i, k := range a.Kinds {
		if k.Kind != AssetKinds[i] {
			t.Fatalf("kind %d is %q, want %q", i, k.Kind, AssetKinds[i])
		}
		if len(k.Names) != k.Streams {
			t.Errorf("kind %s: %d streams, names %v", k.Kind, k.Streams, k.Names)
		}
		m[k.Kind] = [2]int{k.Streams, k.Consumers}
		streams += k.Streams
		consumers += k.Consumers
	}
	if streams != a.Streams || consumers != a.Consumers {
		t.Errorf("totals %d streams, %d consumers; the kinds sum to %d, %d", a.Streams, a.Consumers, streams, consumers)
	}
	return m, a
}

// TestAssetsByKind: a store counts the fixed set Open makes, one stream of
// each of Formica's kinds and the queue's consumer; a coordinator's lease
// watch is one consumer more, until it ends; a client's Open adds nothing; an earlier
// version's transfers bucket and a stream of someone else's are counted
// apart.
func TestAssetsByKind(t *testing.T) {
	s, nc := openStore(t, Config{})
	ctx := ctxT(t, 20*time.Second)
	got, a := counts(t, s)
	if a.Streams != OwnStreams || OwnStreams != 12 || a.Consumers != 2 {
		t.Fatalf("%d streams (Open makes %d), %d consumers; want 12 and 2: %+v", a.Streams, OwnStreams, a.Consumers, a.Kinds)
	}
	for _, k := range AssetKinds {
		want := [2]int{1, 0}
		switch k {
		case KindQueue, KindWebhooks:
			want = [2]int{1, 1}
		case KindLegacyTransfers, KindOther:
			want = [2]int{}
		}
		if got[k] != want {
			t.Errorf("%s: %d streams, %d consumers; want %v", k, got[k][0], got[k][1], want)
		}
	}
	if a.CountedAt.IsZero() {
		t.Error("no time counted")
	}

	wctx, stop := context.WithCancel(ctx)
	leases, err := s.WatchLeases(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, nc, Config{Client: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := counts(t, s); got[KindKVLeases] != [2]int{1, 1} || got[KindQueue] != [2]int{1, 1} {
		t.Errorf("with a lease watch: leases %v, queue %v; want a consumer each", got[KindKVLeases], got[KindQueue])
	}
	stop()
	for range leases {
	}
	if got, _ := counts(t, s); got[KindKVLeases] != [2]int{1, 0} {
		t.Errorf("the lease watch ended: leases %v, want its consumer gone", got[KindKVLeases])
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: legacyWorkers + "gpu-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	got, a = counts(t, s)
	if got[KindLegacyTransfers] != [2]int{1, 0} || got[KindOther] != [2]int{1, 0} || a.Streams != OwnStreams+2 {
		t.Errorf("legacy %v, other %v, %d streams; want one each, %d", got[KindLegacyTransfers], got[KindOther], a.Streams, OwnStreams+2)
	}
	for _, k := range a.Kinds {
		if k.Kind == KindOther && (len(k.Names) != 1 || k.Names[0] != "ORDERS") {
			t.Errorf("other streams named %v", k.Names)
		}
	}
}

func TestAssetKind(t *testing.T) {
	for name, want := range map[string]string{
		"FORMICA_QUEUE": KindQueue, "FORMICA_EVENTS": KindEvents, "FORMICA_RUN_INDEX": KindIndex,
		"FORMICA_JOURNAL": KindJournal, "FORMICA_CANCELS": KindCancels, "FORMICA_TRANSFERS": KindTransfers, "FORMICA_WEBHOOKS": KindWebhooks,
		"KV_formica_runs": KindKVRuns, "KV_formica_approvals": KindKVApprovals, "KV_formica_leases": KindKVLeases,
		"KV_formica_keys": KindKVKeys, "OBJ_formica_payloads": KindObjPayloads,
		"OBJ_formica_transfers": KindLegacyTransfers, "OBJ_formica_transfers_w_gpu-1": KindLegacyTransfers,
		"OBJ_formica_transfers_w_": KindOther, "KV_other": KindOther, "FORMICA_QUEUE2": KindOther,
	} {
		if got := AssetKind(name); got != want {
			t.Errorf("AssetKind(%q) = %q, want %q", name, got, want)
		}
	}
}
