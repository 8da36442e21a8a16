package base

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ---- glob ----

const globDesc = "Find files and directories whose path, relative to the working directory, " +
	"matches a glob pattern. `*`, `?` and `[...]` match within one path segment; `**` matches " +
	"any number of segments (\"**/*.go\" is every .go file); `{a,b}` matches either " +
	"(\"**/*.{go,md}\"). Returns sorted relative paths, one per line, directories with a " +
	"trailing '/'. .git directories are skipped."

var globParams = []param{
	{name: "pattern", typ: "string", required: true, nonEmpty: true,
		desc: "Glob pattern relative to the working directory, e.g. \"src/**/*_test.go\"."},
}

type globTool struct{ tool }

func (t *globTool) Subject(args json.RawMessage) string { return stringField(args, "pattern") }

func (t *globTool) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Pattern string `json:"pattern"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	if path.IsAbs(a.Pattern) || path.IsAbs(slash(a.Pattern)) {
		return "", badArgs("field %q must be relative to the working directory", "pattern")
	}
	pat := path.Clean(slash(a.Pattern))
	if pat == "." {
		return "", badArgs("field %q must name files, e.g. \"**/*.go\"", "pattern")
	}
	if !doublestar.ValidatePattern(pat) {
		return "", badArgs("field %q: %q is not a valid glob (unclosed [ or {, or a trailing \\)", "pattern", a.Pattern)
	}
	segs := strings.Split(pat, "/")
	if slices.Contains(segs, "..") {
		return "", badArgs("field %q may not contain \"..\": glob searches inside the working directory", "pattern")
	}
	// Walk from the longest literal prefix (never the last segment).
	k := 0
	for k < len(segs)-1 && !strings.ContainsAny(segs[k], `*?[{\`) {
		k++
	}
	prefix := cmp.Or(path.Join(segs[:k]...), ".")
	r, startRel, err := t.h.open(prefix)
	if err != nil {
		return "", err
	}
	defer r.Close()
	var matches []string
	if fi, err := r.Stat(startRel); err == nil && fi.IsDir() {
		matches, err = globWalk(ctx, r.FS(), slash(startRel), prefix, pat)
		if err != nil {
			return "", err
		}
	}
	if len(matches) == 0 {
		return fmt.Sprintf("No files match %q", a.Pattern), nil
	}
	slices.Sort(matches)
	return capLines(len(matches), maxGlobResults, t.h.OutputCap, "matches", func(i int) string { return matches[i] }), nil
}

// capLines joins the lines line(0..n-1), one per line, stopping at max lines
// or when the next would pass outputCap bytes, and says what was left out.
func capLines(n, max, outputCap int, noun string, line func(i int) string) string {
	var out strings.Builder
	shown := 0
	for i := range n {
		s := line(i)
		if shown == max || (shown > 0 && out.Len()+len(s)+1 > outputCap) {
			break
		}
		out.WriteString(text([]byte(s)))
		out.WriteByte('\n')
		shown++
	}
	if shown < n {
		fmt.Fprintf(&out, "[truncated: showing %d of %d %s]", shown, n, noun)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// globWalk walks start (the resolved form of prefix) in fsys and returns the
// paths, spelled from prefix, that match pat (doublestar syntax: **, {a,b}).
func globWalk(ctx context.Context, fsys fs.FS, start, prefix, pat string) ([]string, error) {
	segs := strings.Split(pat, "/")
	// Without ** or braces (whose alternatives may hold a '/'), nothing
	// deeper than the pattern's own depth can match.
	deep := strings.Contains(pat, "**") || strings.Contains(pat, "{")
	var matches []string
	err := fs.WalkDir(fsys, start, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if p == start {
			return err
		}
		if err != nil {
			return nil // unreadable entry: skip it
		}
		name := p
		if start != "." {
			name = p[len(start)+1:]
		}
		if prefix != "." {
			name = prefix + "/" + name
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		ns := strings.Split(name, "/")
		if ok, _ := doublestar.Match(pat, name); ok {
			if d.IsDir() {
				name += "/"
			}
			matches = append(matches, name)
		}
		if d.IsDir() && !deep && len(ns) >= len(segs) {
			return fs.SkipDir
		}
		return nil
	})
	return matches, err
}

// ---- grep ----

const grepDesc = "Search file contents with a Go regular expression (RE2 syntax; \"(?i)\" for " +
	"case-insensitive). Searches `path`, a file or a directory walked recursively (default: the " +
	"working directory), skipping binary files, .git and what .gitignore files ignore (unless " +
	"`include_ignored` is true). Returns `path:line:text` lines."

var grepParams = []param{
	{name: "pattern", typ: "string", required: true, nonEmpty: true, desc: "Go regular expression."},
	{name: "path", typ: "string", desc: "File or directory to search, relative to the working directory (default \".\")."},
	{name: "include_ignored", typ: "boolean", desc: "Also search files and directories that .gitignore files ignore (default false)."},
}

type grepTool struct{ tool }

func (t *grepTool) Subject(args json.RawMessage) string {
	return t.h.pathSubject(cmp.Or(stringField(args, "path"), "."))
}

func (t *grepTool) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Pattern        string `json:"pattern"`
		Path           string `json:"path"`
		IncludeIgnored bool   `json:"include_ignored"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return "", badArgs("field %q is not a valid Go regexp: %v", "pattern", err)
	}
	r, rel, err := t.h.open(cmp.Or(a.Path, "."))
	if err != nil {
		return "", err
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err != nil {
		return "", fsErr(rel, err)
	}
	g := &grepper{ctx: ctx, root: r, fsys: r.FS(), re: re, outputCap: t.h.OutputCap}
	start := slash(rel)
	var ignore *gitignore
	if !a.IncludeIgnored {
		ignore = newGitignore(g.fsys)
	}
	if fi.IsDir() {
		err = fs.WalkDir(g.fsys, start, func(p string, d fs.DirEntry, err error) error {
			switch {
			case ctx.Err() != nil:
				return context.Cause(ctx)
			case p == start && err != nil:
				return fsErr(p, err)
			case err != nil:
				return nil // unreadable entry: skip it
			case d.IsDir() && d.Name() == ".git" && p != start:
				return fs.SkipDir
			case ignore != nil && p != start && ignore.ignored(p, d.IsDir()):
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			case !d.Type().IsRegular(): // directories, symlinks, devices
				return nil
			}
			if _, err := g.file(p); err != nil && ctx.Err() != nil {
				return context.Cause(ctx)
			} // other errors: an unreadable file is skipped
			if g.full {
				return fs.SkipAll
			}
			return nil
		})
	} else {
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%s is not a regular file (%v)", start, fi.Mode().Type())
		}
		var binary bool
		binary, err = g.file(start)
		if binary {
			return "", fmt.Errorf("%w: %s; grep searches text files only", ErrBinaryFile, start)
		}
	}
	if err != nil {
		return "", err
	}
	if g.shown == 0 {
		return fmt.Sprintf("No matches for %q in %s", a.Pattern, start), nil
	}
	if g.full {
		fmt.Fprintf(&g.out, "[truncated after %d matches; narrow the pattern or the path]", g.shown)
	}
	return strings.TrimSuffix(g.out.String(), "\n"), nil
}

// grepper collects matching lines until it is full.
type grepper struct {
	ctx       context.Context
	root      *os.Root
	fsys      fs.FS
	re        *regexp.Regexp
	outputCap int
	out       strings.Builder
	shown     int
	full      bool
}

// file greps one file, reporting binary files (left unsearched).
func (g *grepper) file(name string) (binary bool, err error) {
	f, _, err := openRegular(g.root, name, os.O_RDONLY, 0, "grep searches files")
	if err != nil {
		return false, err
	}
	defer f.Close()
	return scanLines(g.ctx, f, name, maxGrepLineBytes, func(n int, line []byte, cut bool) bool {
		if !g.re.Match(line) {
			return true
		}
		s := fmt.Sprintf("%s:%d:%s", name, n, text(line[:min(len(line), maxLineBytes)]))
		if cut || len(line) > maxLineBytes {
			s += " [line truncated]"
		}
		if g.shown == maxGrepMatches || (g.shown > 0 && g.out.Len()+len(s)+1 > g.outputCap) {
			g.full = true
			return false
		}
		g.out.WriteString(s)
		g.out.WriteByte('\n')
		g.shown++
		return true
	})
}
