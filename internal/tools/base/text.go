package base

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
)

// sniffLen is how much of a file is checked for a NUL byte, the sign of a
// binary file.
const sniffLen = 8000

func looksBinary(head []byte) bool {
	return bytes.IndexByte(head[:min(len(head), sniffLen)], 0) >= 0
}

// text turns file or process bytes into valid UTF-8 for a model.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// slash is a relative path as shown to the model.
func slash(rel string) string { return filepath.ToSlash(rel) }

// fsErr rewrites an os.Root error as "<rel>: <reason>", keeping the cause
// wrapped so errors.Is(err, fs.ErrNotExist) still works.
func fsErr(rel string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", slash(rel), pe.Err)
	}
	return fmt.Errorf("%s: %w", slash(rel), err)
}

// causeError is an error with its own text that still unwraps to a cause.
type causeError struct {
	msg   string
	cause error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.cause }

// scanLines calls line with each line of f (numbered from 1, kept to max
// bytes, cut saying whether it was longer) until it returns false or f
// ends, checking ctx every 4096 lines. A binary file is not read: binary
// is true. rel names f in errors.
func scanLines(ctx context.Context, f io.Reader, rel string, max int, line func(n int, line []byte, cut bool) bool) (binary bool, err error) {
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffLen); looksBinary(head) {
		return true, nil
	}
	lr := lineReader{br: br, max: max}
	for n := 1; ; n++ {
		l, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fsErr(rel, err)
		}
		if n%4096 == 0 && ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		if !line(n, l, cut) {
			return false, nil
		}
	}
}

// lineReader reads lines of any length, keeping at most max bytes of each.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// next returns the next line without its "\n" or "\r\n", and whether it was
// cut at max bytes. The slice is only valid until the next call. At the end
// of input it returns io.EOF; a last line without "\n" is still a line.
func (lr *lineReader) next() (line []byte, cut bool, err error) {
	lr.buf = lr.buf[:0]
	read := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		read = read || len(chunk) > 0
		done := err == nil
		if done {
			chunk = chunk[:len(chunk)-1]
		}
		if room := lr.max - len(lr.buf); len(chunk) > room {
			chunk, cut = chunk[:room], true
		}
		lr.buf = append(lr.buf, chunk...)
		switch {
		case done:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if !read {
				return nil, false, io.EOF
			}
		default:
			return nil, false, err
		}
		if !cut {
			lr.buf = bytes.TrimSuffix(lr.buf, []byte{'\r'})
		}
		return lr.buf, cut, nil
	}
}

// capBuffer is an io.Writer keeping the first and the last bytes of what is
// written to it, at most limit in all, and counting what it dropped.
type capBuffer struct {
	limit      int
	head, tail []byte
	total      int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	headCap := c.limit - c.limit/2
	if k := min(headCap-len(c.head), len(p)); k > 0 {
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailCap := c.limit / 2
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*tailCap+4096 {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-tailCap:]...)
	}
	return n, nil
}

// String returns what was kept; when bytes were dropped in the middle, a
// line saying how many replaces them.
func (c *capBuffer) String() string {
	tail := c.tail
	if len(tail) > c.limit/2 {
		tail = tail[len(tail)-c.limit/2:]
	}
	dropped := c.total - int64(len(c.head)) - int64(len(tail))
	if dropped == 0 {
		return text(append(append([]byte{}, c.head...), tail...))
	}
	return fmt.Sprintf("%s\n[output truncated: %d bytes omitted]\n%s", text(c.head), dropped, text(tail))
}
