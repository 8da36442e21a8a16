package coordinator

import (
	"context"
	"time"

	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// AssetsTimeout bounds one count of the cluster's JetStream assets: a
// paged list of the account's streams (see store.Assets). A client waits
// a little longer for the answer.
const AssetsTimeout = 8 * time.Second

// assetsCountEvery paces the count of the cluster's JetStream assets for
// the metrics.
const assetsCountEvery = 30 * time.Second

// countAssets counts the cluster's JetStream assets for the metrics
// (formica_jetstream_streams, formica_jetstream_consumers): at start, then
// once per assetsCountEvery. A count that fails leaves the last one in
// place.
func (c *Coordinator) countAssets() {
	c.every(assetsCountEvery, true, func() bool {
		if _, err := c.assets(c.background); err != nil && c.background.Err() == nil {
			c.cfg.Logger.Warn("count the JetStream assets", "err", err)
		}
		return true
	})
}

// assets counts the cluster's JetStream assets now, and sets the metrics
// to the count.
func (c *Coordinator) assets(ctx context.Context) (wire.Assets, error) {
	ctx, cancel := context.WithTimeout(ctx, AssetsTimeout)
	defer cancel()
	a, err := c.cfg.Store.Assets(ctx)
	if err != nil {
		return a, err
	}
	count := make([]metrics.AssetCount, len(a.Kinds))
	for i, k := range a.Kinds {
		count[i] = metrics.AssetCount{Kind: k.Kind, Streams: k.Streams, Consumers: k.Consumers}
	}
	c.cfg.Metrics.JetStreamAssets(count)
	return a, nil
}

// handleAssets answers `formica assets` and GET /v1/assets with a count
// made now (which the metrics then show too).
func (c *Coordinator) handleAssets(ctx context.Context, _ wire.Msg, r transport.Replier) {
	a, err := c.assets(ctx)
	if err != nil {
		r.Reply(wire.ErrorReply(err))
		return
	}
	r.Reply(wire.Message(wire.TypeAssetsList, a))
}
