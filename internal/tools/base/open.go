package base

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openRegular opens rel in r with flag, refusing anything but a regular file
// with exactly one link, judged on the opened descriptor so nothing can be
// swapped in after the check. O_TRUNC is applied only once the file passed.
// O_NONBLOCK keeps a FIFO swapped in from blocking the open.
//
// The link rule: a hard link in cwd to a file elsewhere (a key, /etc/shadow)
// is indistinguishable from a file of cwd, so no file with a second name is
// read or written.
func openRegular(r *os.Root, rel string, flag int, perm fs.FileMode, hint string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(rel, (flag&^os.O_TRUNC)|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, nil, fsErr(rel, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkRegular(rel, fi, hint)
	}
	if err == nil && flag&os.O_TRUNC != 0 {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// checkRegular refuses directories, special files and files with more than
// one hard link, giving hint for a directory.
func checkRegular(rel string, fi fs.FileInfo, hint string) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("%s is a directory; %s", slash(rel), hint)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%v)", slash(rel), fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%w: %s has %d links; the file tools refuse files with a second name, "+
			"which may be a file outside the working directory", ErrHardLink, slash(rel), st.Nlink)
	}
	return nil
}

// readRegular reads the whole of rel through openRegular.
func readRegular(r *os.Root, rel, hint string) ([]byte, error) {
	f, _, err := openRegular(r, rel, os.O_RDONLY, 0, hint)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fsErr(rel, err)
	}
	return data, nil
}

// writeRegular replaces the content of rel through openRegular (flag may add
// O_CREATE).
func writeRegular(r *os.Root, rel string, data []byte, flag int, perm fs.FileMode, hint string) error {
	f, _, err := openRegular(r, rel, os.O_WRONLY|os.O_TRUNC|flag, perm, hint)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fsErr(rel, err)
	}
	return nil
}
