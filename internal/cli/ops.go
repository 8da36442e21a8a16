package cli

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/client"
	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// clusterOps is what the cluster commands ask of a cluster. NATS
// (natsOps) and the coordinator's HTTP API (apiOps) implement it; the
// flags choose one (clusterFlags.connect), and no command knows which.
//
// Errors wrap api.ErrNotFound, api.ErrConflict, api.ErrInvalid or
// api.ErrUnavailable as the API's statuses say, over either transport.
type clusterOps interface {
	// Submit queues a run and returns its id.
	Submit(ctx context.Context, body api.SubmitBody) (string, error)
	GetRun(ctx context.Context, id string) (record.Run, error)
	ListRuns(ctx context.Context, status string, limit int, page string) ([]record.Run, string, error)
	// Events replays a run's events after the event id after, then
	// follows them until its execution ends.
	Events(ctx context.Context, id string, after uint64, send func(uint64, event.Event) error) error
	// LastEventID is the id of a run's last event (0: none).
	LastEventID(ctx context.Context, id string) (uint64, error)
	// WaitFinal returns a run's record once it is final.
	WaitFinal(ctx context.Context, id string) (record.Run, error)
	CancelRun(ctx context.Context, id string) error
	ResumeRun(ctx context.Context, id string) error
	Threads(ctx context.Context, id string) ([]api.ThreadSummary, error)
	Transcript(ctx context.Context, id, thread string) (api.Transcript, error)
	ListApprovals(ctx context.Context) ([]api.Approval, error)
	Decide(ctx context.Context, id string, allow bool) error
	Workers(ctx context.Context) ([]wire.WorkerInfo, error)
	Assets(ctx context.Context) (wire.Assets, error)
	Close()
}

// natsOps reaches the cluster over NATS, as a client of its store.
type natsOps struct {
	*service.Service
	nc *nats.Conn
	st *store.Store
}

func (o *natsOps) Submit(ctx context.Context, body api.SubmitBody) (string, error) {
	req, err := body.Request()
	if err != nil {
		return "", err
	}
	return o.Service.Submit(ctx, req)
}

func (o *natsOps) LastEventID(ctx context.Context, id string) (uint64, error) {
	return o.st.LastEventID(ctx, id)
}

func (o *natsOps) WaitFinal(ctx context.Context, id string) (record.Run, error) {
	ch, err := o.st.WatchRecord(ctx, id)
	if err != nil {
		return record.Run{}, err
	}
	for r := range ch {
		if r.Status.Final() {
			return r, nil
		}
	}
	return record.Run{}, context.Cause(ctx)
}

func (o *natsOps) Close() {
	o.Service.Close()
	broker.Drain(o.nc, 5*time.Second)
}

// apiOps reaches the cluster through a coordinator's HTTP API. Its errors
// match the API's kinds by their statuses (client.APIError.Unwrap).
type apiOps struct{ *client.Client }

func (o apiOps) Submit(ctx context.Context, body api.SubmitBody) (string, error) {
	id, err := o.Client.Submit(ctx, body)
	if errors.Is(err, api.ErrConflict) {
		// The one conflict of a submission: its id names another run.
		return "", api.Wrap(store.ErrIDTaken, err)
	}
	return id, err
}

func (o apiOps) ListRuns(ctx context.Context, status string, limit int, page string) ([]record.Run, string, error) {
	return o.Client.ListRuns(ctx, client.ListOptions{Status: event.Status(status), Limit: limit, Page: page})
}

// LastEventID reads the run's events to their end: the API has no call
// for it, and it serves the resume of a run that has ended.
func (o apiOps) LastEventID(ctx context.Context, id string) (uint64, error) {
	var last uint64
	err := o.Events(ctx, id, 0, func(seq uint64, _ event.Event) error {
		last = seq
		return nil
	})
	return last, err
}

func (o apiOps) WaitFinal(ctx context.Context, id string) (record.Run, error) {
	return o.Wait(ctx, id)
}

func (apiOps) Close() {}
