// Package service is what users ask of a Formica cluster — submit, list, get,
// follow, cancel, approve, list workers — implemented over the run store and
// NATS. The HTTP API serves it (it satisfies api.Backend) and the CLI calls it
// directly, so both behave alike. A run that goes around the queue, started
// and followed on one connection, is package client's.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/submission"
	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// Config configures a Service.
type Config struct {
	Conn  *nats.Conn
	Store *store.Store
	// DefaultModel is given to submitted agents that name no model.
	DefaultModel string
	// Cwd is the harness directory of submitted runs on the workers; empty
	// leaves it to the coordinator that runs them (its --cwd).
	Cwd string
	// Ceilings cap what a submission may ask: the coordinators' own, so a
	// submission past them is refused before it is queued.
	Ceilings limits.Ceilings
	// LiveWorkers, when set, counts the live workers this process's
	// coordinator knows; /readyz reports it.
	LiveWorkers func() int
	// NeedWorker makes Ready fail while LiveWorkers is 0: a coordinator
	// that hosts no worker itself (--local-workers 0) cannot run anything
	// until one registers.
	NeedWorker bool
}

// Service implements api.Backend.
type Service struct {
	cfg Config
	tr  *natstransport.Transport
	// feeds follow each watched run once for all its watchers (Events).
	feeds *store.Feeds
}

var _ api.Backend = (*Service)(nil)

// New returns a service.
func New(cfg Config) (*Service, error) {
	if cfg.Conn == nil || cfg.Store == nil {
		return nil, errors.New("service: a NATS connection and a store are required")
	}
	cfg.DefaultModel = cmp.Or(cfg.DefaultModel, "sim")
	tr, err := natstransport.New(cfg.Conn, natstransport.Config{})
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, tr: tr, feeds: cfg.Store.NewFeeds(store.DefaultFeedBuffer)}, nil
}

// Close releases the service's subscriptions and ends the event streams
// it serves.
func (s *Service) Close() error {
	s.feeds.Close()
	return s.tr.Close()
}

// Following is how many runs the service follows now for the watchers of
// their events (Events): one subscription each, whatever the number of
// watchers.
func (s *Service) Following() int { return s.feeds.Following() }

// Submit queues a run. The same id twice is one run.
func (s *Service) Submit(ctx context.Context, req api.SubmitRequest) (string, error) {
	sub, err := s.Submission(req)
	if err != nil {
		return "", err
	}
	if err := s.Enqueue(ctx, sub); err != nil {
		return "", err
	}
	return sub.RunID, nil
}

// Enqueue hands a submission to a coordinator, which checks it against its
// own ceilings, writes its queued record and queues it: clients write
// neither records nor the queue. With no coordinator up, nothing is queued
// and the error says so (unavailable).
func (s *Service) Enqueue(ctx context.Context, sub wire.RunSubmit) error {
	msg := wire.Message(wire.TypeRunSubmit, sub)
	if limit := int(s.cfg.Conn.MaxPayload()); len(msg.Data) > limit {
		return api.Errorf(api.ErrInvalid, "submission of run %s is %d bytes, past the NATS max payload of %d", sub.RunID, len(msg.Data), limit)
	}
	// The run's trace starts here, where it is submitted.
	ctx, span := tracing.StartSubmit(ctx, sub.RunID)
	defer span.End()
	msg = wire.WithIDs(msg, sub.RunID, "")
	msg.Header = tracing.Inject(ctx, msg.Header)
	_, err := s.ask(ctx, wire.SubjectEnqueue, msg, "to queue the run")
	var u *unanswered
	if errors.As(err, &u) && errors.Is(u.cause, transport.ErrNoResponders) {
		u.msg += ": nothing was queued"
	}
	if errors.Is(err, api.ErrConflict) {
		// The one conflict of a submission: its id names another run.
		return api.Wrap(store.ErrIDTaken, err)
	}
	return err
}

// Submission builds the queued form of a request: the default agent when it
// names none, the model override, and the run's default model on every agent
// without one.
func (s *Service) Submission(req api.SubmitRequest) (wire.RunSubmit, error) {
	root, agents := spec.Default().Agent, req.Agents
	if req.Agent != nil {
		root = *req.Agent
	}
	if req.Model != "" {
		root.Model = req.Model
	}
	root.Model = cmp.Or(root.Model, s.cfg.DefaultModel)
	filled := make(map[string]spec.Agent, len(agents))
	for name, a := range agents {
		a.Model = cmp.Or(a.Model, s.cfg.DefaultModel)
		filled[name] = a
	}
	sub := wire.RunSubmit{
		RunID: cmp.Or(req.ID, uuid.NewString()), Task: req.Task, Agent: root, Agents: filled, Cwd: s.cfg.Cwd,
		Limits:   limits.Config{MaxDepth: req.MaxDepth, MaxThreads: req.MaxThreads},
		Budget:   root.Budget.Override(req.Budget),
		Timeout:  req.Timeout,
		Webhooks: req.Webhooks,
	}
	if err := submission.Check(sub, submission.Options{Ceilings: s.cfg.Ceilings}); err != nil {
		return wire.RunSubmit{}, api.Wrap(api.ErrInvalid, err)
	}
	return sub, nil
}

// ListRuns lists records, newest first, each shown as GetRun shows it.
func (s *Service) ListRuns(ctx context.Context, status string, limit int, page string) ([]record.Run, string, error) {
	if err := api.CheckList(status, limit); err != nil {
		return nil, "", err
	}
	p, err := s.cfg.Store.ListPage(ctx, store.ListOptions{Status: event.Status(status), Limit: limit, Page: page})
	if err != nil {
		return nil, "", mapErr(err)
	}
	for i := range p.Runs {
		if err := s.keptCancel(ctx, &p.Runs[i]); err != nil {
			return nil, "", err
		}
	}
	return p.Runs, p.Next, nil
}

// GetRun returns one record. A run not yet finished whose cancel a client
// asked while no coordinator could record it shows that request as its
// cancel_requested, as the coordinator that picks it up will honour it.
func (s *Service) GetRun(ctx context.Context, id string) (record.Run, error) {
	r, _, err := s.cfg.Store.GetRecord(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return r, api.Errorf(api.ErrNotFound, "run %s not found", id)
	}
	if err != nil {
		return r, mapErr(err)
	}
	return r, s.keptCancel(ctx, &r)
}

// keptCancel shows, in a run not yet finished, the cancel a client asked
// while no coordinator could record it as the record's cancel_requested:
// the coordinator that picks the run up will honour it. GetRun and
// ListRuns show records through it alike.
func (s *Service) keptCancel(ctx context.Context, r *record.Run) error {
	if r.Status.Final() || r.CancelRequested != "" {
		return nil
	}
	asked, err := s.cfg.Store.CancelRequested(ctx, r.RunID, r.Resumes)
	if err != nil {
		return mapErr(err)
	}
	if asked {
		r.CancelRequested = wire.CancelledByUser
	}
	return nil
}

// Events replays and follows a run's events until it finishes. Every
// watcher of a run in this process shares one follow of it (store.Feeds):
// a run's stored events are read by direct gets, and its live ones come
// through one subscription, decoded once and fanned out in memory.
func (s *Service) Events(ctx context.Context, id string, after uint64, send func(uint64, event.Event) error) error {
	rec, err := s.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if rec.Status.Final() {
		// Stored history only, which ends at the run's run.finished: when
		// there is nothing after the resume point (the client has it all,
		// the run was cancelled before it started, or its events expired),
		// nothing more will come.
		last, err := s.cfg.Store.LastEventID(ctx, id)
		if err != nil {
			return mapErr(err)
		}
		if last <= after {
			return nil
		}
		// All of it is stored (a record is final only once its run's
		// events are): read, not followed.
		return mapErr(s.cfg.Store.Replay(ctx, id, after, send))
	}
	if rec.Status != record.Queued {
		// Its execution may have ended with its record not final yet: a
		// client that has the run.finished would otherwise wait for one
		// that never comes.
		last, e, err := s.cfg.Store.LastEvent(ctx, id)
		if err != nil {
			return mapErr(err)
		}
		if last <= after && e.Type == event.RunFinished && !e.Time.Before(rec.StartedAt) {
			return nil
		}
	}
	return mapErr(s.feeds.Events(ctx, id, after, send))
}

// CancelRun cancels a queued or running run. The request is kept first on
// the run's subject of the cancel-requests stream, the one thing a client
// writes: a run whose coordinator is dead hears no message, and the next
// coordinator to pick it up honours the request. Then any coordinator
// records it (a queued run ends at once) and tells the run's owner; with
// none up, the kept request stands and GetRun shows it.
func (s *Service) CancelRun(ctx context.Context, id string) error {
	rec, err := s.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if rec.Status.Final() {
		return api.Errorf(api.ErrConflict, "run %s already %s", id, rec.Status)
	}
	if err := s.cfg.Store.RequestCancel(ctx, id, rec.Resumes); err != nil {
		return mapErr(err)
	}
	_, err = s.ask(ctx, wire.SubjectCancelRequest, wire.Message(wire.TypeRunCancel, wire.RunCancel{RunID: id, Resumes: rec.Resumes}), "to record the cancel")
	switch {
	case errors.Is(err, errNoCoordinator):
		return nil // kept; honoured when a coordinator picks the run up
	case errors.Is(err, api.ErrConflict):
		// The run ended meanwhile. A coordinator that took it from the
		// queue may have ended it for the request just kept: if it ended
		// cancelled, this cancel holds, and says so.
		if now, gerr := s.GetRun(ctx, id); gerr == nil && now.Status == event.Cancelled {
			return nil
		}
	}
	return err
}

// CancelThread cancels one thread of a running run and its subtree. The
// run's owner answers; no answer means no coordinator runs it now.
func (s *Service) CancelThread(ctx context.Context, runID, threadID string) error {
	rec, err := s.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if rec.Status.Final() {
		return api.Errorf(api.ErrConflict, "run %s already %s", runID, rec.Status)
	}
	c := wire.Cancel{RunID: runID, ThreadIDs: []string{threadID}, Reason: wire.CancelledByUser}
	call, err := transport.Request(ctx, s.tr, wire.SubjectRunCancel, wire.Message(wire.TypeCancel, c))
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	defer call.Close()
	m, err := call.Next(ctx, 5*time.Second)
	if err != nil {
		if errors.Is(err, transport.ErrNoResponders) || errors.Is(err, transport.ErrSilent) || errors.Is(err, context.DeadlineExceeded) {
			return api.Errorf(api.ErrConflict, "run %s is not running on any coordinator", runID)
		}
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	if err := wire.MsgError(m); err != nil {
		var re *wire.Error
		if errors.As(err, &re) && re.Code == wire.CodeNotFound {
			return api.Errorf(api.ErrNotFound, "%s", re.Message)
		}
		return err
	}
	return nil
}

// ListApprovals lists approvals waiting for a person.
func (s *Service) ListApprovals(ctx context.Context) ([]api.Approval, error) {
	as, err := s.cfg.Store.ListApprovals(ctx, true)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]api.Approval, len(as))
	for i, a := range as {
		out[i] = api.Approval{ID: a.ID, RunID: a.RunID, ThreadID: a.ThreadID, ThreadPath: a.ThreadPath,
			Tool: a.Tool, Arguments: a.Arguments, InDoubt: a.InDoubt, RequestedAt: a.RequestedAt}
	}
	return out, nil
}

// Decide answers a pending approval. The decision goes to a coordinator,
// which records it: clients may read the approvals bucket, not write it.
func (s *Service) Decide(ctx context.Context, id string, allow bool) error {
	_, err := s.ask(ctx, wire.SubjectApprovalDecide, wire.Message(wire.TypeApprovalDecide, wire.ApprovalDecide{ID: id, Allow: allow}), "to record the decision")
	return err
}

// askTimeout bounds the wait for a coordinator's answer to a request.
const askTimeout = 15 * time.Second

// errNoCoordinator: no coordinator answered a request, because none runs
// (transport.ErrNoResponders) or none answered within askTimeout.
var errNoCoordinator = errors.New("no coordinator answered")

// unanswered is a request no coordinator answered: unavailable (503),
// said in its own words.
type unanswered struct {
	msg   string
	cause error
}

func (e *unanswered) Error() string   { return e.msg }
func (e *unanswered) Unwrap() []error { return []error{api.ErrUnavailable, errNoCoordinator, e.cause} }

// ask sends a request that any one coordinator answers and returns its
// answer, with the coordinator's errors as the API's: not_found 404,
// conflict 409, bad_request 400. No coordinator answering within
// askTimeout is unavailable (503), said with what the request was doing
// ("to record the decision").
func (s *Service) ask(ctx context.Context, subject string, m wire.Msg, doing string) (wire.Msg, error) {
	call, err := transport.Request(ctx, s.tr, subject, m)
	if err != nil {
		return wire.Msg{}, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	defer call.Close()
	reply, err := call.Next(ctx, askTimeout)
	if err != nil {
		if ctx.Err() != nil {
			return wire.Msg{}, context.Cause(ctx)
		}
		if errors.Is(err, transport.ErrNoResponders) {
			return wire.Msg{}, &unanswered{"no coordinator is running " + doing, err}
		}
		return wire.Msg{}, &unanswered{fmt.Sprintf("no coordinator answered within %v %s: %v", askTimeout, doing, err), err}
	}
	err = wire.MsgError(reply)
	var re *wire.Error
	if errors.As(err, &re) {
		switch re.Code {
		case wire.CodeNotFound:
			return reply, api.Errorf(api.ErrNotFound, "%s", re.Message)
		case wire.CodeConflict:
			return reply, api.Errorf(api.ErrConflict, "%s", re.Message)
		case wire.CodeBadRequest, wire.CodeBadMessage:
			return reply, api.Errorf(api.ErrInvalid, "%s", re.Message)
		}
	}
	return reply, err
}

// Workers asks any coordinator for the live workers.
func (s *Service) Workers(ctx context.Context) ([]wire.WorkerInfo, error) {
	call, err := transport.Request(ctx, s.tr, wire.SubjectWorkers, wire.Msg{Type: string(wire.TypeWorkersList)})
	if err != nil {
		return nil, err
	}
	defer call.Close()
	m, err := call.Next(ctx, 5*time.Second)
	if err != nil {
		if errors.Is(err, transport.ErrNoResponders) {
			return nil, api.Errorf(api.ErrUnavailable, "no coordinator is running")
		}
		return nil, api.Errorf(api.ErrUnavailable, "no coordinator answered: %v", err)
	}
	var ws []wire.WorkerInfo
	if err := wire.DecodeAs(m.Data, wire.TypeWorkersList, &ws); err != nil {
		return nil, err
	}
	return ws, nil
}

// Assets asks any coordinator to count the cluster's JetStream streams and
// consumers by kind (clients may not list streams themselves).
func (s *Service) Assets(ctx context.Context) (wire.Assets, error) {
	call, err := transport.Request(ctx, s.tr, wire.SubjectAssets, wire.Msg{Type: string(wire.TypeAssetsList)})
	if err != nil {
		return wire.Assets{}, err
	}
	defer call.Close()
	m, err := call.Next(ctx, assetsWait)
	if err != nil {
		if errors.Is(err, transport.ErrNoResponders) {
			return wire.Assets{}, api.Errorf(api.ErrUnavailable, "no coordinator is running")
		}
		return wire.Assets{}, api.Errorf(api.ErrUnavailable, "no coordinator answered: %v (a client credential issued by an earlier version may not ask on %s: reissue it)", err, wire.SubjectAssets)
	}
	if err := wire.MsgError(m); err != nil {
		return wire.Assets{}, api.Errorf(api.ErrUnavailable, "a coordinator could not count them: %v", err)
	}
	var a wire.Assets
	if err := wire.DecodeAs(m.Data, wire.TypeAssetsList, &a); err != nil {
		return wire.Assets{}, err
	}
	return a, nil
}

// assetsWait is how long Assets waits for a coordinator's count, which
// takes at most coordinator.AssetsTimeout.
const assetsWait = 10 * time.Second

// Ready reports whether NATS and the store answer.
func (s *Service) Ready(ctx context.Context) error {
	if st := s.cfg.Conn.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w: NATS connection %v", api.ErrUnavailable, st)
	}
	if err := s.cfg.Store.Ping(ctx); err != nil {
		return fmt.Errorf("%w: run store: %v", api.ErrUnavailable, err)
	}
	if n, known := s.LiveWorkers(); s.cfg.NeedWorker && known && n == 0 {
		return api.Errorf(api.ErrUnavailable, "no live worker (0 registered): runs wait until one registers; start a worker, or run the coordinator with --local-workers N")
	}
	return nil
}

// LiveWorkers implements api.WorkerCounter.
func (s *Service) LiveWorkers() (int, bool) {
	if s.cfg.LiveWorkers == nil {
		return 0, false
	}
	return s.cfg.LiveWorkers(), true
}

// mapErr turns store errors into the API's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return api.Wrap(api.ErrNotFound, err)
	case errors.Is(err, store.ErrDecided), errors.Is(err, store.ErrIDTaken):
		return api.Wrap(api.ErrConflict, err)
	case errors.Is(err, store.ErrInvalidID), errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrBadCursor):
		return api.Wrap(api.ErrInvalid, err)
	case errors.Is(err, store.ErrFeedsClosed):
		return api.Wrap(api.ErrUnavailable, err)
	}
	return err
}
