package base

import (
	"bufio"
	"io/fs"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// gitignore answers whether a path is ignored by the .gitignore files of
// the directories from the walk's root down to it, with git's rules for
// the common cases: comments, blank lines, `!` to re-include, a trailing
// `/` for directories only, a `/` inside a pattern anchoring it to its
// file's directory, and `*`, `?`, `[...]`, `**` wildcards. The last
// matching line wins. Files above the harness root are not read.
type gitignore struct {
	fsys  fs.FS
	rules map[string][]ignoreRule // by directory, "." for the root
}

type ignoreRule struct {
	pattern string // relative to its directory, doublestar syntax
	negate  bool
	dirOnly bool
}

func newGitignore(fsys fs.FS) *gitignore {
	return &gitignore{fsys: fsys, rules: map[string][]ignoreRule{}}
}

// load reads dir's .gitignore, once; a missing or unreadable file adds nothing.
func (g *gitignore) load(dir string) {
	if _, done := g.rules[dir]; done {
		return
	}
	g.rules[dir] = nil
	f, err := g.fsys.Open(path.Join(dir, ".gitignore"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var rules []ignoreRule
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r ignoreRule
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, `\`) {
			line = line[1:] // \# and \! are literal
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if strings.Contains(line, "/") {
			line = strings.TrimPrefix(line, "/")
		} else {
			line = "**/" + line
		}
		if !doublestar.ValidatePattern(line) {
			continue
		}
		r.pattern = line
		rules = append(rules, r)
	}
	g.rules[dir] = rules
}

// ignored reports whether p (slash-separated, relative to the root) is
// ignored; isDir says whether it is a directory.
func (g *gitignore) ignored(p string, isDir bool) bool {
	ignored := false
	dir := "."
	rest := p
	for {
		g.load(dir)
		for _, r := range g.rules[dir] {
			if r.dirOnly && !isDir {
				continue
			}
			if ok, _ := doublestar.Match(r.pattern, rest); ok {
				ignored = !r.negate
			}
		}
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return ignored
		}
		dir, rest = path.Join(dir, rest[:i]), rest[i+1:]
	}
}
