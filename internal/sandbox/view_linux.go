package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// systemDirs are the host's program and library directories, shown
// read-only (or as the symlinks they are, as /bin -> usr/bin on Debian).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are the files of /etc a command may need: users and groups by
// name, name resolution, the dynamic linker, certificates, time zone, shell
// and locale defaults, Debian's alternatives. Anything else of /etc (shadow,
// ssh, sudoers, ...) does not exist in the view.
var etcEntries = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
	"gai.conf", "gitconfig", "group", "host.conf", "hosts", "inputrc", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "localtime", "magic", "magic.mime", "mime.types", "nsswitch.conf", "os-release",
	"passwd", "profile", "profile.d", "protocols", "resolv.conf", "services", "ssl", "terminfo", "timezone",
}

// devices are bound from the host's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// Sizes of the view's memory file systems.
const (
	tmpSize = "512m" // the private /tmp (HOME and TMPDIR)
	shmSize = "64m"  // /dev/shm
)

// buildView replaces the init's mount namespace root with the call's view:
// dir read-write through an idmapped mount (userns maps the worker's ids to
// the tool user's; a plain bind when userns < 0, rootless), the system directories and a few /etc files read-only,
// a private /tmp, a minimal /dev, a /proc of the call's PID namespace, and
// nothing else. The view's root itself is read-only.
func buildView(dir string, readOnly []string, userns int) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	// Clone the working directory first: the staging root below may hide it.
	cwd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone %s: %w", dir, err)
	}
	defer unix.Close(cwd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if userns >= 0 {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(userns)
	}
	if err := unix.MountSetattr(cwd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("idmapped mount of %s (its file system must support idmapped mounts): %w", dir, err)
	}

	// Likewise the read-only paths, which may be under /tmp too.
	extra := make([]int, len(readOnly))
	for i, p := range readOnly {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("clone read-only path %s: %w", p, err)
		}
		defer unix.Close(fd)
		ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &ro); err != nil {
			return fmt.Errorf("attributes of %s: %w", p, err)
		}
		extra[i] = fd
	}

	const root = "/tmp" // staging: exists everywhere, private to this namespace now
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("view root: %w", err)
	}
	for _, d := range systemDirs {
		if err := showHost(d, root+d); err != nil {
			return err
		}
	}
	if err := os.Mkdir(root+"/etc", 0o755); err != nil {
		return err
	}
	for _, e := range etcEntries {
		if err := showHost("/etc/"+e, root+"/etc/"+e); err != nil {
			return err
		}
	}
	if err := memFS(root+"/tmp", "mode=1777,size="+tmpSize, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	// After /tmp, so paths under /tmp are mounted over it.
	for i, p := range readOnly {
		if err := mountClone(extra[i], p, root+p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(root+dir, 0o755); err != nil {
		return fmt.Errorf("mount point of %s: %w", dir, err)
	}
	if err := unix.MoveMount(cwd, "", unix.AT_FDCWD, root+dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s: %w", dir, err)
	}
	if err := buildDev(root + "/dev"); err != nil {
		return err
	}
	if err := os.Mkdir(root+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2"); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}

	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("read-only view root: %w", err)
	}
	return nil
}

// mountClone mounts the cloned tree fd of host path src at dst, making the
// mount point a directory or an empty file as src is.
func mountClone(fd int, src, dst string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.MkdirAll(dst, 0o755)
	} else if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
		err = os.WriteFile(dst, nil, 0o644)
	}
	if err != nil {
		return fmt.Errorf("mount point of %s: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s: %w", src, err)
	}
	return nil
}

// showHost makes host path src appear at dst: a symlink as the same
// symlink, a directory or file as a read-only recursive bind. A missing src
// is skipped.
func showHost(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	return bindHost(src, dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

// bindHost clones the mount tree at src onto a new mount point dst, with attrs.
func bindHost(src, dst string, attrs uint64) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone %s: %w", src, err)
	}
	defer unix.Close(fd)
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attrs}); err != nil {
		return fmt.Errorf("attributes of %s: %w", src, err)
	}
	return mountClone(fd, src, dst)
}

func memFS(dst, opts string, flags uintptr) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dst, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("mount %s: %w", dst, err)
	}
	return nil
}

// buildDev makes a minimal /dev: the harmless character devices, the
// standard stream links and a private /dev/shm.
func buildDev(dev string) error {
	if err := memFS(dev, "mode=0755,size=64k", unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return err
	}
	for _, d := range devices {
		if err := bindHost("/dev/"+d, filepath.Join(dev, d), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return memFS(filepath.Join(dev, "shm"), "mode=1777,size="+shmSize, unix.MS_NOSUID|unix.MS_NODEV)
}
