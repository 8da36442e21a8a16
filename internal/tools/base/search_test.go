package base

import (
	"fmt"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/tools"
)

func searchFixture(t *testing.T, cfg Config) *fixture {
	f := newFixture(t, cfg)
	f.file(t, "a.go", "package main\nfunc main() {}\n")
	f.file(t, "b.txt", "no code here\n")
	f.file(t, "sub/c.go", "func helper() {}\n")
	f.file(t, "sub/deep/d.go", "// func in a comment\n")
	f.file(t, ".git/x.go", "func hidden() {}\n")
	f.file(t, "sub/.git/y.go", "func hidden() {}\n")
	f.file(t, "bin.dat", "func\x00binary")
	f.link(t, "sub", "alias")
	return f
}

func TestGlob(t *testing.T) {
	f := searchFixture(t, Config{})
	f.escapes(t)
	tests := []struct {
		pattern, want string
		sentinel      error
		errText       string
	}{
		{pattern: "*.go", want: "a.go"},
		{pattern: "**/*.go", want: "a.go\nsub/c.go\nsub/deep/d.go"},
		{pattern: "./sub/**/*.go", want: "sub/c.go\nsub/deep/d.go"},
		{pattern: "sub/*", want: "sub/c.go\nsub/deep/\nsub/reldir"},
		{pattern: "s?b/d*/?.go", want: "sub/deep/d.go"},
		{pattern: "alias/*.go", want: "alias/c.go"},
		{pattern: "sub/c.go", want: "sub/c.go"},
		{pattern: ".git/*", want: ".git/x.go"},
		{pattern: "nomatch*", want: `No files match "nomatch*"`},
		{pattern: "missing/**", want: `No files match "missing/**"`},
		{pattern: "../*", sentinel: tools.ErrBadArgs, errText: `may not contain ".."`},
		{pattern: "/etc/*", sentinel: tools.ErrBadArgs, errText: "must be relative"},
		{pattern: "[", sentinel: tools.ErrBadArgs, errText: `"pattern"`},
		{pattern: "outdir/*", sentinel: ErrOutsideCwd, errText: "outdir"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			got, err := f.run(t, GlobName, fmt.Sprintf(`{"pattern":%q}`, tt.pattern))
			checkErr(t, err, tt.sentinel, tt.errText)
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
	t.Run("cap", func(t *testing.T) {
		f := newFixture(t, Config{OutputCap: 10})
		for i := range 5 {
			f.file(t, fmt.Sprintf("f%d", i), "")
		}
		got, err := f.run(t, GlobName, `{"pattern":"f*"}`)
		if want := "f0\nf1\nf2\n[truncated: showing 3 of 5 matches]"; err != nil || got != want {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	})
}

// TestGlobBracesAndDoubleStar: `**` and `{a,b}` together, as models write
// them (before doublestar, "**/*.{go,md}" matched nothing).
func TestGlobBracesAndDoubleStar(t *testing.T) {
	f := newFixture(t, Config{})
	for _, name := range []string{"README.md", "main.go", "docs/guide.md", "docs/img/logo.png", "pkg/a/a.go", "pkg/a/a_test.go", ".git/HEAD.md"} {
		f.file(t, name, "x\n")
	}
	for _, tt := range []struct{ pattern, want string }{
		{"**/*.{go,md}", "README.md\ndocs/guide.md\nmain.go\npkg/a/a.go\npkg/a/a_test.go"},
		{"{docs,pkg}/**/*.md", "docs/guide.md"},
		{"pkg/**/*_test.go", "pkg/a/a_test.go"},
		{"**", "README.md\ndocs/\ndocs/guide.md\ndocs/img/\ndocs/img/logo.png\nmain.go\npkg/\npkg/a/\npkg/a/a.go\npkg/a/a_test.go"},
		{"*.{png,go}", "main.go"},
	} {
		got, err := f.run(t, GlobName, fmt.Sprintf(`{"pattern":%q}`, tt.pattern))
		if err != nil || got != tt.want {
			t.Errorf("glob %q: got %q, %v; want %q", tt.pattern, got, err, tt.want)
		}
	}
	if _, err := f.run(t, GlobName, `{"pattern":"*.{go"}`); err == nil {
		t.Error("an unclosed brace is not refused")
	}
}

// TestGrepGitignore: grep skips .git and what .gitignore files ignore, at
// any depth and with negation, unless include_ignored is set.
func TestGrepGitignore(t *testing.T) {
	f := newFixture(t, Config{})
	f.file(t, ".gitignore", "# deps\nnode_modules/\n*.log\n/build\n!keep.log\n")
	f.file(t, "src/.gitignore", "gen/\n")
	f.file(t, "main.go", "needle\n")
	f.file(t, "keep.log", "needle\n")
	f.file(t, "debug.log", "needle\n")
	f.file(t, "node_modules/lib/index.js", "needle\n")
	f.file(t, "build/out.txt", "needle\n")
	f.file(t, "src/build/kept.txt", "needle\n") // /build is anchored to the root
	f.file(t, "src/gen/x.go", "needle\n")
	f.file(t, "src/y.go", "needle\n")
	f.file(t, "other/gen/z.go", "needle\n") // src/.gitignore does not apply here
	f.file(t, ".git/config", "needle\n")
	got, err := f.run(t, GrepName, `{"pattern":"needle"}`)
	want := "keep.log:1:needle\nmain.go:1:needle\nother/gen/z.go:1:needle\nsrc/build/kept.txt:1:needle\nsrc/y.go:1:needle"
	if err != nil || got != want {
		t.Errorf("grep:\n%s (%v)\nwant:\n%s", got, err, want)
	}
	got, err = f.run(t, GrepName, `{"pattern":"needle","path":"src"}`)
	if want := "src/build/kept.txt:1:needle\nsrc/y.go:1:needle"; err != nil || got != want {
		t.Errorf("grep src:\n%s (%v)\nwant:\n%s", got, err, want)
	}
	got, err = f.run(t, GrepName, `{"pattern":"needle","include_ignored":true}`)
	if err != nil || !strings.Contains(got, "node_modules/lib/index.js") || !strings.Contains(got, "debug.log") || strings.Contains(got, ".git/") {
		t.Errorf("grep include_ignored:\n%s (%v)", got, err)
	}
	if _, err := f.run(t, GrepName, `{"pattern":"needle","include_ignored":"yes"}`); err == nil {
		t.Error("a non-boolean include_ignored is not refused")
	}
}

func TestGrep(t *testing.T) {
	f := searchFixture(t, Config{})
	f.escapes(t)
	tests := []struct {
		name, args, want string
		sentinel         error
		errText          string
	}{
		{name: "whole tree", args: `{"pattern":"func \\w+\\("}`, want: "a.go:2:func main() {}\nsub/c.go:1:func helper() {}"},
		{name: "subdir", args: `{"pattern":"func","path":"sub"}`, want: "sub/c.go:1:func helper() {}\nsub/deep/d.go:1:// func in a comment"},
		{name: "one file", args: `{"pattern":"^package","path":"a.go"}`, want: "a.go:1:package main"},
		{name: "via symlink inside", args: `{"pattern":"helper","path":"alias"}`, want: "sub/c.go:1:func helper() {}"},
		{name: "case-insensitive", args: `{"pattern":"(?i)NO CODE"}`, want: "b.txt:1:no code here"},
		{name: "no match", args: `{"pattern":"zzz"}`, want: `No matches for "zzz" in .`},
		{name: "outside secret through symlinks", args: `{"pattern":"SECRET"}`, want: `No matches for "SECRET" in .`},
		{name: "bad regexp", args: `{"pattern":"("}`, sentinel: tools.ErrBadArgs, errText: `"pattern" is not a valid Go regexp`},
		{name: "binary file", args: `{"pattern":"func","path":"bin.dat"}`, sentinel: ErrBinaryFile, errText: "bin.dat"},
		{name: "missing path", args: `{"pattern":"x","path":"nope"}`, errText: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.run(t, GrepName, tt.args)
			checkErr(t, err, tt.sentinel, tt.errText)
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestGrepCaps(t *testing.T) {
	f := newFixture(t, Config{OutputCap: 1 << 20})
	f.file(t, "many.txt", strings.Repeat("hit\n", maxGrepMatches+10))
	f.file(t, "long.txt", "hit"+strings.Repeat("y", maxLineBytes+5)+"\n")
	got, err := f.run(t, GrepName, `{"pattern":"hit","path":"many.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != maxGrepMatches+1 || lines[maxGrepMatches] != fmt.Sprintf("[truncated after %d matches; narrow the pattern or the path]", maxGrepMatches) {
		t.Errorf("got %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	got, err = f.run(t, GrepName, `{"pattern":"hit","path":"long.txt"}`)
	if want := "long.txt:1:hit" + strings.Repeat("y", maxLineBytes-3) + " [line truncated]"; err != nil || got != want {
		t.Errorf("long line: got %q, %v", got, err)
	}

	small := newFixture(t, Config{OutputCap: 20})
	small.file(t, "f.txt", "hit 1\nhit 2\nhit 3\n")
	got, err = small.run(t, GrepName, `{"pattern":"hit"}`)
	if want := "f.txt:1:hit 1\n[truncated after 1 matches; narrow the pattern or the path]"; err != nil || got != want {
		t.Errorf("output cap: got %q, %v; want %q", got, err, want)
	}
}
