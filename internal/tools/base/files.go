package base

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// pathTool is a tool on one path argument, "path", which is its permission
// subject.
type pathTool struct{ tool }

func (t *pathTool) Subject(args json.RawMessage) string {
	return t.h.pathSubject(stringField(args, "path"))
}

var pathParam = param{name: "path", typ: "string", required: true, nonEmpty: true,
	desc: "Path relative to the working directory (absolute paths must stay inside it)."}

// ---- read_file ----

const readFileDesc = "Read a text file. Returns its lines numbered from 1, as `<number>\\t<line>`. " +
	"Reads up to 2000 lines from `offset` unless `limit` says otherwise; when more lines remain, " +
	"the last line says which offset to continue from. Binary files are refused."

var readFileParams = []param{
	pathParam,
	{name: "offset", typ: "integer", positive: true, desc: "First line to read, 1-based (default 1)."},
	{name: "limit", typ: "integer", positive: true, desc: "Number of lines to read (default 2000)."},
}

type readFile struct{ pathTool }

func (t *readFile) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	offset, limit := max(a.Offset, 1), cmp.Or(a.Limit, readDefaultLines)
	r, rel, err := t.h.open(a.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if _, err := regularFile(r, rel, "use list_dir for directories"); err != nil {
		return "", err
	}
	f, _, err := openRegular(r, rel, os.O_RDONLY, 0, "use list_dir for directories")
	if err != nil {
		return "", err
	}
	defer f.Close()

	var out strings.Builder
	n, last, full := 0, 0, false
	binary, err := scanLines(ctx, f, rel, maxLineBytes, func(i int, line []byte, cut bool) bool {
		n = i
		if n < offset || n-offset >= limit || full {
			return true
		}
		s := fmt.Sprintf("%6d\t%s", n, text(line))
		if cut {
			s += " [line truncated]"
		}
		if last > 0 && out.Len()+len(s)+1 > t.h.OutputCap {
			full = true
			return true
		}
		out.WriteString(s)
		out.WriteByte('\n')
		last = n
		return true
	})
	switch {
	case binary:
		return "", fmt.Errorf("%w: %s; read_file shows text files only", ErrBinaryFile, slash(rel))
	case err != nil:
		return "", err
	}
	switch {
	case n == 0:
		return "(empty file)", nil
	case offset > n:
		return "", badArgs("field %q is %d but %s has only %d lines", "offset", offset, slash(rel), n)
	case last < n:
		fmt.Fprintf(&out, "[truncated: showing lines %d-%d of %d; continue with offset=%d]", offset, last, n, last+1)
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// regularFile stats rel in r and refuses anything but a regular file (a FIFO
// or device could block or never end), giving hint for a directory.
func regularFile(r *os.Root, rel, hint string) (fs.FileInfo, error) {
	fi, err := r.Stat(rel)
	if err != nil {
		return nil, fsErr(rel, err)
	}
	if err := checkRegular(rel, fi, hint); err != nil {
		return nil, err
	}
	return fi, nil
}

// ---- write_file ----

const writeFileDesc = "Create or overwrite a file with the given content, creating missing " +
	"parent directories. Returns the number of bytes written."

var writeFileParams = []param{
	pathParam,
	{name: "content", typ: "string", required: true, desc: "The complete new content of the file."},
}

type writeFile struct{ pathTool }

func (t *writeFile) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	r, rel, err := t.h.open(a.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if rel == "." {
		return "", errors.New("path names the working directory itself, not a file")
	}
	if _, err := r.Stat(rel); err == nil {
		if _, err := regularFile(r, rel, "write_file writes files only"); err != nil {
			return "", err
		}
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return "", fsErr(dir, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", context.Cause(ctx)
	}
	if err := writeRegular(r, rel, []byte(a.Content), os.O_CREATE, 0o644, "write_file writes files only"); err != nil {
		return "", err
	}
	return fmt.Sprintf("Wrote %d bytes to %s", len(a.Content), slash(rel)), nil
}

// ---- edit_file ----

const editFileDesc = "Replace one exact occurrence of `old` with `new` in a text file. " +
	"`old` must match exactly once, whitespace included; add surrounding lines to make it unique. " +
	"An empty `new` deletes `old`."

var editFileParams = []param{
	pathParam,
	{name: "old", typ: "string", required: true, nonEmpty: true, desc: "The exact text to replace; must occur exactly once."},
	{name: "new", typ: "string", required: true, desc: "The replacement text."},
}

type editFile struct{ pathTool }

func (t *editFile) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
		Old  string `json:"old"`
		New  string `json:"new"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	r, rel, err := t.h.open(a.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	fi, err := regularFile(r, rel, "edit_file edits files only")
	if errors.Is(err, fs.ErrNotExist) {
		return "", &causeError{slash(rel) + " does not exist; use write_file to create it", err}
	}
	if err != nil {
		return "", err
	}
	data, err := readRegular(r, rel, "edit_file edits files only")
	if err != nil {
		return "", err
	}
	if looksBinary(data) {
		return "", fmt.Errorf("%w: %s; edit_file edits text files only", ErrBinaryFile, slash(rel))
	}
	s := string(data)
	switch n := strings.Count(s, a.Old); n {
	case 0:
		return "", fmt.Errorf("old text not found in %s; it must match exactly, whitespace and indentation included", slash(rel))
	case 1:
	default:
		return "", fmt.Errorf("old text found %d times in %s; include more surrounding context so it matches exactly once", n, slash(rel))
	}
	s = strings.Replace(s, a.Old, a.New, 1)
	if err := ctx.Err(); err != nil {
		return "", context.Cause(ctx)
	}
	if err := writeRegular(r, rel, []byte(s), 0, fi.Mode().Perm(), "edit_file edits files only"); err != nil {
		return "", err
	}
	return fmt.Sprintf("Edited %s: replaced 1 occurrence (%d bytes written)", slash(rel), len(s)), nil
}

// ---- list_dir ----

const listDirDesc = "List a directory: one entry per line, sorted by name, directories " +
	"marked with a trailing '/', symlinks shown as `name -> target`. Use \".\" for the working directory."

var listDirParams = []param{
	{name: "path", typ: "string", required: true, nonEmpty: true,
		desc: "Directory relative to the working directory; \".\" is the working directory."},
}

type listDir struct{ pathTool }

func (t *listDir) Run(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decode(args, t.params, &a); err != nil {
		return "", err
	}
	r, rel, err := t.h.open(a.Path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if fi, err := r.Stat(rel); err != nil {
		return "", fsErr(rel, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory; use read_file for files", slash(rel))
	}
	f, err := r.Open(rel)
	if err != nil {
		return "", fsErr(rel, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", fsErr(rel, err)
	}
	if len(entries) == 0 {
		return "(empty directory)", nil
	}
	slices.SortFunc(entries, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	return capLines(len(entries), maxListEntries, t.h.OutputCap, "entries", func(i int) string {
		e := entries[i]
		s := e.Name()
		switch {
		case e.IsDir():
			s += "/"
		case e.Type()&fs.ModeSymlink != 0:
			if target, err := r.Readlink(filepath.Join(rel, e.Name())); err == nil {
				s += " -> " + target
			}
		}
		return s
	}), nil
}
