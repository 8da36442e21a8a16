package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// ErrPoolExhausted means every file of a pool is held by another process.
var ErrPoolExhausted = errors.New("every file of the pool is in use")

// TakeFree holds, for this process, the first file in dir (in name order)
// matching pattern that no other process holds, without waiting, and
// returns its path. Identical replicas that must not share an identity
// (workers scaled by compose, each needing credentials of its own) take
// one each from a pool on a shared mount; a replica that dies frees its
// file for the next. The files are opened read-only, so the pool may be
// mounted read-only.
func TakeFree(dir, pattern string) (string, *Lock, error) {
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return "", nil, fmt.Errorf("dirlock: pool %s: %w", dir, err)
	}
	sort.Strings(paths)
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return "", nil, fmt.Errorf("dirlock: pool: %w", err)
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return path, &Lock{f: f}, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return "", nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
		}
	}
	if len(paths) == 0 {
		return "", nil, fmt.Errorf("dirlock: pool %s holds no %s files", dir, pattern)
	}
	return "", nil, fmt.Errorf("%w: all %d %s files in %s are held", ErrPoolExhausted, len(paths), pattern, dir)
}
