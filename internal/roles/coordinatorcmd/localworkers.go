package coordinatorcmd

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

// Files in the data dir that keep ids across restarts.
const (
	// localWorkerIDFile holds the stem of the local workers' ids.
	localWorkerIDFile = "local-worker-id"
	// coordinatorIDFile holds the coordinator's id when --id names none.
	coordinatorIDFile = "coordinator-id"
)

// localWorkerIDs are the ids of n local workers, the same at every start
// on one data dir: a restart brings the same workers back (their metrics
// and records name them) rather than new ones.
func localWorkerIDs(dataDir string, n int) ([]string, error) {
	stem, err := keptID(dataDir, localWorkerIDFile)
	if err != nil {
		return nil, fmt.Errorf("local workers: %w", err)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = stem + "-" + strconv.Itoa(i+1)
		if err := ids.CheckToken(out[i]); err != nil {
			return nil, fmt.Errorf("local workers: %s: %w", filepath.Join(dataDir, localWorkerIDFile), err)
		}
	}
	return out, nil
}

// coordinatorID is the coordinator's id on an embedded server with no
// --id: the same at every start on one data dir, so a restarted
// coordinator knows the runs it held before (their leases name it) and
// takes them over at once.
func coordinatorID(dataDir string) (string, error) {
	id, err := keptID(dataDir, coordinatorIDFile)
	if err != nil {
		return "", fmt.Errorf("coordinator id: %w", err)
	}
	if err := ids.CheckToken(id); err != nil {
		return "", fmt.Errorf("coordinator id: %s: %w", filepath.Join(dataDir, coordinatorIDFile), err)
	}
	return id, nil
}

// keptID reads the id kept in file of dataDir, or makes one (from the
// host name and a random part) and keeps it there. The data dir is used
// by one process at a time.
func keptID(dataDir, file string) (string, error) {
	path := filepath.Join(dataDir, file)
	b, err := os.ReadFile(path)
	id := strings.TrimSpace(string(b))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		id = worker.NewID()
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	}
	return id, nil
}
