// Package dirlock gives one process at a time a data directory. Two
// coordinators on one JetStream store corrupt it (each runs runs the other
// cannot see, and the store finds missing message blocks on restart), so
// the second must refuse to start and say who holds the directory.
//
// The lock is an flock(2) on a file in the directory: the kernel releases
// it when the holder exits, however it exits, so a crash leaves no stale
// lock behind. The file records the holder (pid, host, start time) for the
// message a refused process prints.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// FileName is the lock file inside the directory.
const FileName = "formica.lock"

// ErrLocked means another process holds the directory.
var ErrLocked = errors.New("data directory in use")

// Lock is a held directory lock.
type Lock struct {
	f *os.File
}

// Acquire creates dir if needed and locks it for this process, without
// waiting. If another process holds it, the error wraps ErrLocked and names
// the holder as it recorded itself.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by %s", ErrLocked, dir, holder(path))
		}
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("pid %d on host %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(info), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirlock: record holder in %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// holder is who the lock file says holds it.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "another process (it has not recorded itself yet)"
}

// Release unlocks the directory. Safe to call twice.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}
