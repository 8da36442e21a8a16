package base

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxLinkHops bounds symlink chains, as the kernel's ELOOP does.
const maxLinkHops = 40

// Confine resolves p, relative to cwd or absolute, to the absolute,
// symlink-free path it names, and refuses it with an error wrapping
// ErrOutsideCwd when that path is outside cwd.
//
// `..` is applied first, lexically. Then every symlink on the path is
// followed: for a path that does not exist yet, the longest existing prefix is
// resolved (a dangling symlink is followed to where it points), so a write
// through a symlinked parent directory or a dangling symlink is caught too.
// cwd itself is resolved the same way. Confine touches nothing but metadata.
func Confine(cwd, p string) (string, error) {
	root, err := resolveRoot(cwd)
	if err != nil {
		return "", err
	}
	abs, _, err := confine(root, p)
	return abs, err
}

// resolveRoot makes cwd absolute and symlink-free and checks it is a directory.
func resolveRoot(cwd string) (string, error) {
	if cwd == "" {
		return "", errors.New("empty (a working directory is required)")
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", cwd)
	}
	return root, nil
}

// confine is Confine for a root already resolved by resolveRoot. It returns
// the resolved absolute path and the same path relative to root ("." for
// root itself).
func confine(root, p string) (abs, rel string, err error) {
	if p == "" {
		return "", "", errors.New("empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	joined := filepath.Clean(p)
	if !filepath.IsAbs(joined) {
		joined = filepath.Join(root, joined)
	}
	abs, err = resolve(joined, 0)
	if err != nil {
		return "", "", fmt.Errorf("resolve %q: %w", p, err)
	}
	if !within(root, abs) {
		return "", "", fmt.Errorf("%w: %q resolves to %s, outside %s", ErrOutsideCwd, p, abs, root)
	}
	rel, err = filepath.Rel(root, abs)
	if err != nil {
		return "", "", fmt.Errorf("resolve %q: %w", p, err)
	}
	return abs, rel, nil
}

// resolve follows every symlink of the clean absolute path p. The longest
// existing prefix goes through filepath.EvalSymlinks; missing components are
// appended as they are, except that a dangling symlink on the way is followed
// to its target.
func resolve(p string, hops int) (string, error) {
	existing, rest := p, ""
	for {
		r, err := filepath.EvalSymlinks(existing)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(existing); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops >= maxLinkHops {
				return "", fmt.Errorf("too many levels of symbolic links at %s", existing)
			}
			target, err := os.Readlink(existing)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(existing), target)
			}
			return resolve(filepath.Join(target, rest), hops+1)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return filepath.Join(existing, rest), nil
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if p == root {
		return true
	}
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(p, prefix)
}

// open confines p to the working directory and opens the directory as a
// root, so that what the tool does through it stays inside even when a link
// changes after the check. It returns p relative to the root; the caller
// closes the root.
func (h *harness) open(p string) (*os.Root, string, error) {
	_, rel, err := confine(h.root, p)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(h.root)
	if err != nil {
		return nil, "", err
	}
	return r, rel, nil
}

// pathSubject is the permission subject of a path argument: the cleaned,
// symlink-resolved path relative to cwd in slash form ("." for cwd itself),
// or, when it cannot be confined, the cleaned path as given.
func (h *harness) pathSubject(p string) string {
	if p == "" {
		return ""
	}
	if _, rel, err := confine(h.root, p); err == nil {
		return filepath.ToSlash(rel)
	}
	c := filepath.Clean(p)
	if filepath.IsAbs(c) {
		if r, err := filepath.Rel(h.root, c); err == nil {
			c = r
		}
	}
	return filepath.ToSlash(c)
}
