package base

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/tools"
)

func TestReadFile(t *testing.T) {
	f := newFixture(t, Config{OutputCap: 200})
	f.file(t, "three.txt", "l1\nl2\nl3\n")
	f.file(t, "nonl.txt", "a\r\nb")
	f.file(t, "empty.txt", "")
	f.file(t, "bin.dat", "text\x00more")
	f.file(t, "long.txt", strings.Repeat("x", maxLineBytes+10)+"\n")
	var many strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&many, "%d\n", i)
	}
	f.file(t, "many.txt", many.String())
	f.link(t, "three.txt", "alias.txt")
	if err := os.Mkdir(filepath.Join(f.root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, args, want string
		sentinel         error
		errText          string
	}{
		{name: "whole file", args: `{"path":"three.txt"}`, want: "     1\tl1\n     2\tl2\n     3\tl3"},
		{name: "offset and limit", args: `{"path":"three.txt","offset":2,"limit":1}`,
			want: "     2\tl2\n[truncated: showing lines 2-2 of 3; continue with offset=3]"},
		{name: "offset to end", args: `{"path":"three.txt","offset":3}`, want: "     3\tl3"},
		{name: "crlf and no final newline", args: `{"path":"nonl.txt"}`, want: "     1\ta\n     2\tb"},
		{name: "empty", args: `{"path":"empty.txt"}`, want: "(empty file)"},
		{name: "symlink inside", args: `{"path":"alias.txt","limit":1}`,
			want: "     1\tl1\n[truncated: showing lines 1-1 of 3; continue with offset=2]"},
		{name: "output cap", args: `{"path":"many.txt","offset":100}`,
			want: outputCapWant(100, 200)},
		{name: "long line", args: `{"path":"long.txt"}`,
			want: "     1\t" + strings.Repeat("x", maxLineBytes) + " [line truncated]"},
		{name: "offset past end", args: `{"path":"three.txt","offset":4}`, sentinel: tools.ErrBadArgs, errText: `"offset" is 4 but three.txt has only 3 lines`},
		{name: "binary", args: `{"path":"bin.dat"}`, sentinel: ErrBinaryFile, errText: "bin.dat"},
		{name: "directory", args: `{"path":"dir"}`, errText: "dir is a directory; use list_dir"},
		{name: "missing", args: `{"path":"nope.txt"}`, sentinel: fs.ErrNotExist, errText: "nope.txt"},
		{name: "zero offset", args: `{"path":"three.txt","offset":0}`, sentinel: tools.ErrBadArgs, errText: `"offset" must be at least 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.run(t, ReadFileName, tt.args)
			checkErr(t, err, tt.sentinel, tt.errText)
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// outputCapWant is what read_file shows of many.txt from offset under cap.
func outputCapWant(offset, limit int) string {
	var b strings.Builder
	n := offset
	for ; ; n++ {
		s := fmt.Sprintf("%6d\t%d\n", n, n)
		if b.Len()+len(s) > limit {
			break
		}
		b.WriteString(s)
	}
	fmt.Fprintf(&b, "[truncated: showing lines %d-%d of 2500; continue with offset=%d]", offset, n-1, n)
	return b.String()
}

func TestReadFileDefaultLimit(t *testing.T) {
	f := newFixture(t, Config{OutputCap: 1 << 20})
	var many strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&many, "%d\n", i)
	}
	f.file(t, "many.txt", many.String())
	got, err := f.run(t, ReadFileName, `{"path":"many.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 2001 || lines[1999] != "  2000\t2000" ||
		lines[2000] != "[truncated: showing lines 1-2000 of 2500; continue with offset=2001]" {
		t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-2:])
	}
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t, Config{})
	f.file(t, "old.txt", "old content\n")
	if err := os.Mkdir(filepath.Join(f.root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args, want string
		file, content    string
		sentinel         error
		errText          string
	}{
		{name: "new file in new dirs", args: `{"path":"a/b/c.txt","content":"hello\n"}`,
			want: "Wrote 6 bytes to a/b/c.txt", file: "a/b/c.txt", content: "hello\n"},
		{name: "overwrite", args: `{"path":"old.txt","content":"new"}`,
			want: "Wrote 3 bytes to old.txt", file: "old.txt", content: "new"},
		{name: "empty content", args: `{"path":"empty.txt","content":""}`,
			want: "Wrote 0 bytes to empty.txt", file: "empty.txt", content: ""},
		{name: "absolute inside", args: fmt.Sprintf(`{"path":%q,"content":"x"}`, filepath.Join(f.root, "abs.txt")),
			want: "Wrote 1 bytes to abs.txt", file: "abs.txt", content: "x"},
		{name: "directory", args: `{"path":"dir","content":"x"}`, errText: "dir is a directory"},
		{name: "cwd", args: `{"path":".","content":"x"}`, errText: "working directory itself"},
		{name: "missing content", args: `{"path":"x.txt"}`, sentinel: tools.ErrBadArgs, errText: `"content"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.run(t, WriteFileName, tt.args)
			checkErr(t, err, tt.sentinel, tt.errText)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if tt.file != "" {
				if c := readFileT(t, filepath.Join(f.root, tt.file)); c != tt.content {
					t.Errorf("file holds %q, want %q", c, tt.content)
				}
			}
		})
	}
}

func TestEditFile(t *testing.T) {
	f := newFixture(t, Config{})
	tests := []struct {
		name, before, args, want, after string
		errText                         string
		sentinel                        error
	}{
		{name: "replace once", before: "a\nfoo\nb\n", args: `{"path":"f.txt","old":"foo","new":"bar"}`,
			want: "Edited f.txt: replaced 1 occurrence (8 bytes written)", after: "a\nbar\nb\n"},
		{name: "delete", before: "keep drop keep", args: `{"path":"f.txt","old":" drop","new":""}`,
			want: "Edited f.txt: replaced 1 occurrence (9 bytes written)", after: "keep keep"},
		{name: "not found", before: "abc", args: `{"path":"f.txt","old":"x","new":"y"}`,
			errText: "old text not found in f.txt", after: "abc"},
		{name: "three times", before: "x x x", args: `{"path":"f.txt","old":"x","new":"y"}`,
			errText: "old text found 3 times in f.txt", after: "x x x"},
		{name: "empty old", before: "abc", args: `{"path":"f.txt","old":"","new":"y"}`,
			sentinel: tools.ErrBadArgs, errText: `"old" must not be empty`, after: "abc"},
		{name: "missing new", before: "abc", args: `{"path":"f.txt","old":"a"}`,
			sentinel: tools.ErrBadArgs, errText: `missing required field "new"`, after: "abc"},
		{name: "binary", before: "a\x00b", args: `{"path":"f.txt","old":"a","new":"c"}`,
			sentinel: ErrBinaryFile, after: "a\x00b", errText: "f.txt"},
		{name: "missing file", args: `{"path":"none.txt","old":"a","new":"b"}`,
			sentinel: fs.ErrNotExist, errText: "none.txt does not exist; use write_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(f.root, "f.txt")
			writeTestFile(t, p, tt.before)
			if err := os.Chmod(p, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := f.run(t, EditFileName, tt.args)
			checkErr(t, err, tt.sentinel, tt.errText)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if c := readFileT(t, p); c != tt.after {
				t.Errorf("file holds %q, want %q", c, tt.after)
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode after edit: %v, %v; want 0600", fi.Mode(), err)
			}
		})
	}
}

func TestListDir(t *testing.T) {
	f := newFixture(t, Config{})
	f.file(t, "b.txt", "")
	f.file(t, "a.txt", "")
	f.file(t, "sub/z/deep.txt", "")
	f.link(t, "a.txt", "link")
	if err := os.Mkdir(filepath.Join(f.root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want, errText string
	}{
		{name: "cwd", path: ".", want: "a.txt\nb.txt\nempty/\nlink -> a.txt\nsub/"},
		{name: "subdir", path: "sub", want: "z/"},
		{name: "empty", path: "empty/", want: "(empty directory)"},
		{name: "file", path: "a.txt", errText: "a.txt is not a directory"},
		{name: "missing", path: "nope", errText: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.run(t, ListDirName, fmt.Sprintf(`{"path":%q}`, tt.path))
			checkErr(t, err, nil, tt.errText)
			if got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
	t.Run("cap", func(t *testing.T) {
		f := newFixture(t, Config{OutputCap: 12})
		for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
			f.file(t, n, "")
		}
		got, err := f.run(t, ListDirName, `{"path":"."}`)
		if want := "a1\na2\na3\na4\n[truncated: showing 4 of 5 entries]"; err != nil || got != want {
			t.Errorf("got %q, %v; want %q", got, err, want)
		}
	})
}

// TestFileToolsRefuseEscapes runs every file tool on every escaping path:
// each call fails with ErrOutsideCwd and nothing outside changes.
func TestFileToolsRefuseEscapes(t *testing.T) {
	f := newFixture(t, Config{})
	escapes := f.escapes(t)
	for _, p := range escapes {
		q, _ := json.Marshal(p)
		calls := map[string]string{
			ReadFileName:  fmt.Sprintf(`{"path":%s}`, q),
			WriteFileName: fmt.Sprintf(`{"path":%s,"content":"PWNED"}`, q),
			EditFileName:  fmt.Sprintf(`{"path":%s,"old":"SECRET","new":"PWNED"}`, q),
			ListDirName:   fmt.Sprintf(`{"path":%s}`, q),
			GrepName:      fmt.Sprintf(`{"pattern":"SECRET","path":%s}`, q),
		}
		for tool, args := range calls {
			t.Run(tool+" "+p, func(t *testing.T) {
				got, err := f.run(t, tool, args)
				checkErr(t, err, ErrOutsideCwd, "outside")
				if got != "" {
					t.Errorf("result %q on refusal", got)
				}
			})
		}
	}
	f.checkOutsideUntouched(t)
}
