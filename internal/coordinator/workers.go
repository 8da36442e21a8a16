package coordinator

import (
	"context"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// handleWorkers answers `formica workers` and GET /v1/workers from this
// coordinator's registry; every coordinator sees every worker's heartbeat.
func (c *Coordinator) handleWorkers(_ context.Context, _ wire.Msg, r transport.Replier) {
	r.Reply(wire.Message(wire.TypeWorkersList, c.registry.list()))
}
