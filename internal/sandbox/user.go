package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultToolUser is the uid:gid tools run as by default (nobody's on Debian).
const DefaultToolUser = "65534:65534"

// parseToolUser reads "uid[:gid]" or a user name from /etc/passwd.
func parseToolUser(s string) (uid, gid int, err error) {
	if s == "" {
		s = DefaultToolUser
	}
	u, g, hasGID := strings.Cut(s, ":")
	uid, err = strconv.Atoi(u)
	if err != nil {
		if hasGID {
			return 0, 0, fmt.Errorf("tool user %q: want uid[:gid] or a user name", s)
		}
		uid, gid, err = lookupUser(u)
		if err != nil {
			return 0, 0, fmt.Errorf("tool user %q: %w", s, err)
		}
	} else {
		gid = uid
		if hasGID {
			if gid, err = strconv.Atoi(g); err != nil {
				return 0, 0, fmt.Errorf("tool user %q: want uid[:gid] or a user name", s)
			}
		}
	}
	switch {
	case uid == 0 || gid == 0:
		return 0, 0, fmt.Errorf("tool user %q: tools may not run as root (uid or gid 0)", s)
	case uid < 0 || gid < 0 || uid > 1<<31-2 || gid > 1<<31-2:
		return 0, 0, fmt.Errorf("tool user %q: id out of range", s)
	}
	return uid, gid, nil
}

// lookupUser finds name in /etc/passwd (no cgo, no NSS: a tool user is a
// local account).
func lookupUser(name string) (uid, gid int, err error) {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 4 || fs[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(fs[2])
		gid, err2 := strconv.Atoi(fs[3])
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, err
		}
		return uid, gid, nil
	}
	return 0, 0, errors.New("no such user in /etc/passwd")
}
