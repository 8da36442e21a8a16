package service

import (
	"context"
	"slices"
	"strings"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/wire"
)

// ResumeRun asks a coordinator to queue a failed or cancelled run again
// under its id. The coordinator that takes it reads its journal first, so
// finished threads are reused and failed ones carry on from their last good
// turn.
func (s *Service) ResumeRun(ctx context.Context, id string) error {
	_, err := s.ask(ctx, wire.SubjectResume, wire.Message(wire.TypeRunResume, wire.RunResume{RunID: id}), "to resume the run")
	return err
}

// Threads lists a run's threads from its journal.
func (s *Service) Threads(ctx context.Context, id string) ([]api.ThreadSummary, error) {
	rec, err := s.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	// The run's threads only: the root, the helpers its journal names and
	// those its record holds.
	known := make([]string, 0, len(rec.Threads))
	for _, t := range rec.Threads {
		known = append(known, t.ID)
	}
	threads, err := s.cfg.Store.ReadRunJournal(ctx, id, known...)
	if err != nil {
		return nil, mapErr(err)
	}
	rootName := ""
	out := make([]api.ThreadSummary, 0, len(threads))
	for _, tj := range threads {
		tid := tj.ID
		t := journal.BuildTranscript(id, tid, journal.Trusted(tj.Entries))
		if t.Name == "" {
			continue // journaled nothing of its own (only a spawn refused for it, say)
		}
		if t.Depth == 0 && t.ParentID == "" {
			rootName = t.Name
		}
		out = append(out, api.ThreadSummary{ID: tid, ParentID: t.ParentID, Name: t.Name, Path: t.Path, Depth: t.Depth,
			Status: t.Status, Error: t.Error, Worker: t.Worker, Attempts: t.Attempts, Usage: t.Usage,
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt})
	}
	for i := range out {
		out[i].Path = namePath(rootName, out[i].Path)
	}
	slices.SortStableFunc(out, func(a, b api.ThreadSummary) int {
		switch {
		case a.Depth == 0 && b.Depth != 0:
			return -1
		case b.Depth == 0 && a.Depth != 0:
			return 1
		}
		return 0
	})
	return out, nil
}

// Transcript reads one thread's transcript from its journal.
func (s *Service) Transcript(ctx context.Context, id, thread string) (api.Transcript, error) {
	entries, err := s.cfg.Store.ReadJournal(ctx, id, thread)
	if err != nil {
		return api.Transcript{}, mapErr(err)
	}
	trusted := journal.Trusted(entries)
	if len(trusted) == 0 {
		if _, err := s.GetRun(ctx, id); err != nil {
			return api.Transcript{}, err // no such run, said so
		}
		return api.Transcript{}, api.Errorf(api.ErrNotFound, "no journal for thread %s of run %s", thread, id)
	}
	t := journal.BuildTranscript(id, thread, trusted)
	rootName := t.Name
	if t.Depth > 0 {
		rootName = ""
		if root, err := s.cfg.Store.ReadJournal(ctx, id, journal.RootID(id)); err == nil {
			rootName = journal.BuildTranscript(id, "", journal.Trusted(root)).Name
		}
	}
	t.Path = namePath(rootName, t.Path)
	return t, nil
}

// namePath turns a thread's journaled path (root/name/...) into the names
// from the root down (formica/research/outline).
func namePath(rootName, path string) string {
	if rootName == "" {
		return path
	}
	rest, ok := strings.CutPrefix(path, "root")
	if !ok || (rest != "" && rest[0] != '/') {
		return path
	}
	return rootName + rest
}
