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

func TestMatchSegs(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"**", "a/b/c", true},
		{"**/c", "c", true},
		{"a/**/c", "a/c", true},
		{"a/**/c", "a/x/y/c", true},
		{"a/**/c", "a/x/y/d", false},
		{"a/**/**/c", "a/c", true},
		{"*.go", "a/b.go", false},
		{"a/*", "a", false},
	}
	for _, tt := range tests {
		if got := matchSegs(strings.Split(tt.pattern, "/"), strings.Split(tt.name, "/")); got != tt.want {
			t.Errorf("matchSegs(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
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
