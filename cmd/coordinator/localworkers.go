package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/worker"
)

// localWorkerIDFile, in the data dir, holds the stem of the local
// workers' ids.
const localWorkerIDFile = "local-worker-id"

// localWorkerIDs are the ids of n local workers, the same at every start
// on one data dir: a restart brings the same workers back (their transfers
// buckets, metrics and records name them) rather than new ones. The stem
// is made once, from the host name and a random part, and kept in the data
// dir, which only one process uses at a time.
func localWorkerIDs(dataDir string, n int) ([]string, error) {
	path := filepath.Join(dataDir, localWorkerIDFile)
	b, err := os.ReadFile(path)
	stem := strings.TrimSpace(string(b))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		stem = worker.NewID()
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("local workers: %w", err)
		}
		if err := os.WriteFile(path, []byte(stem+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("local workers: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("local workers: %w", err)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = stem + "-" + strconv.Itoa(i+1)
		if err := ids.CheckToken(out[i]); err != nil {
			return nil, fmt.Errorf("local workers: %s: %w", path, err)
		}
	}
	return out, nil
}
