package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/formica-run/formica/internal/wire"
)

// The kinds of JetStream streams Assets counts, each Formica's own but
// the last two: the transfers buckets of earlier versions, and whatever
// else the account holds.
const (
	KindQueue           = "queue"
	KindEvents          = "events"
	KindIndex           = "index"
	KindJournal         = "journal"
	KindCancels         = "cancels"
	KindTransfers       = "transfers"
	KindWebhooks        = "webhooks"
	KindKVRuns          = "kv_runs"
	KindKVApprovals     = "kv_approvals"
	KindKVLeases        = "kv_leases"
	KindKVKeys          = "kv_keys"
	KindObjPayloads     = "obj_payloads"
	KindLegacyTransfers = "legacy_transfers"
	KindOther           = "other"
)

// AssetKinds is every kind, in the order Assets reports them.
var AssetKinds = []string{KindQueue, KindEvents, KindIndex, KindJournal, KindCancels, KindTransfers, KindWebhooks,
	KindKVRuns, KindKVApprovals, KindKVLeases, KindKVKeys, KindObjPayloads, KindLegacyTransfers, KindOther}

// streamKinds are the streams Open makes, by name.
var streamKinds = map[string]string{
	QueueStream:                  KindQueue,
	EventsStream:                 KindEvents,
	IndexStream:                  KindIndex,
	JournalStream:                KindJournal,
	CancelsStream:                KindCancels,
	TransfersStream:              KindTransfers,
	WebhooksStream:               KindWebhooks,
	kvStream(RunsBucket):         KindKVRuns,
	kvStream(ApprovalsBucket):    KindKVApprovals,
	kvStream(LeasesBucket):       KindKVLeases,
	kvStream(KeysBucket):         KindKVKeys,
	ObjectStream(PayloadsBucket): KindObjPayloads,
}

// OwnStreams is how many streams Open makes: the store's fixed set,
// whatever the number of coordinators, workers, runs and watchers.
var OwnStreams = len(streamKinds)

// AssetKind is the kind of the stream called name.
func AssetKind(name string) string {
	if k, ok := streamKinds[name]; ok {
		return k
	}
	if bucket, ok := strings.CutPrefix(name, "OBJ_"); ok && isLegacyBucket(bucket) {
		return KindLegacyTransfers
	}
	return KindOther
}

// Assets lists the account's streams, each with the number of its
// consumers, in one paged request set (the JetStream API's stream list,
// up to 256 streams a page), and counts them by kind. It needs the right
// to list streams, which only coordinators have.
func (s *Store) Assets(ctx context.Context) (wire.Assets, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	a := wire.Assets{Kinds: make([]wire.AssetKind, len(AssetKinds))}
	for i, k := range AssetKinds {
		a.Kinds[i].Kind = k
	}
	l := s.js.ListStreams(ctx)
	for info := range l.Info() {
		k := &a.Kinds[slices.Index(AssetKinds, AssetKind(info.Config.Name))]
		k.Streams++
		k.Consumers += info.State.Consumers
		a.Streams++
		a.Consumers += info.State.Consumers
		k.Names = append(k.Names, info.Config.Name)
	}
	if err := l.Err(); err != nil {
		return wire.Assets{}, fmt.Errorf("store: list streams: %w", err)
	}
	for i := range a.Kinds {
		k := &a.Kinds[i]
		slices.Sort(k.Names)
		k.Names = slices.Clip(k.Names[:min(len(k.Names), wire.MaxAssetNames)])
	}
	a.CountedAt = s.cfg.Now()
	return a, nil
}
