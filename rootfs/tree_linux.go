package rootfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// openInRoot opens rel inside the tree rootFd as if rootFd were "/": symlinks
// (including absolute ones and "..") never resolve outside it.
func openInRoot(rootFd int, rel string, flags int) (int, error) {
	return unix.Openat2(rootFd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mkdirAllInRoot creates the directory rel (and parents) inside rootFd and
// returns an O_PATH fd to it.
func mkdirAllInRoot(rootFd int, rel string) (int, error) {
	rel = strings.Trim(filepath.Clean("/"+rel), "/")
	fd, err := unix.Dup(rootFd)
	if err != nil {
		return -1, err
	}
	if rel == "" {
		return fd, nil
	}
	for _, c := range strings.Split(rel, "/") {
		nfd, err := openInRoot(fd, c, unix.O_PATH|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("mkdir %s: %w", rel, err)
			}
			nfd, err = openInRoot(fd, c, unix.O_PATH|unix.O_DIRECTORY)
		}
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", rel, err)
		}
		fd = nfd
	}
	return fd, nil
}

// writeFileInRoot replaces the file rel inside rootFd with data. A symlink
// at rel is replaced, never followed.
func writeFileInRoot(rootFd int, rel string, data []byte, mode uint32) error {
	dir, base := filepath.Split(rel)
	pfd, err := mkdirAllInRoot(rootFd, dir)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Unlinkat(pfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("replace %s: %w", rel, err)
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return f.Chmod(os.FileMode(mode))
}

// readFileInRoot reads rel inside rootFd, resolving symlinks inside the tree.
func readFileInRoot(rootFd int, rel string) ([]byte, error) {
	fd, err := openInRoot(rootFd, rel, unix.O_RDONLY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<20))
}

func openTree(tree string) (int, error) {
	return unix.Open(tree, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

const (
	sandboxPasswd = "sandbox:x:1000:1000:nsbox sandbox:/workspace:/bin/sh"
	sandboxGroup  = "sandbox:x:1000:"
	hostsFile     = "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"
)

// prepareTree gives a tree what every sandbox expects of it: the mount point
// directories, the sandbox user and group, /etc/hostname and /etc/hosts. The
// tree may be untrusted (an import): nothing here follows a link out of it.
func prepareTree(tree string) error {
	rootFd, err := openTree(tree)
	if err != nil {
		return err
	}
	defer unix.Close(rootFd)
	if err := os.Chmod(tree, 0o755); err != nil {
		return err
	}
	for _, mp := range MountPoints() {
		mode := uint32(0o755)
		if mp == "tmp" {
			mode = 0o1777
		}
		var st unix.Stat_t
		err := unix.Fstatat(rootFd, mp, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Unlinkat(rootFd, mp, 0); err != nil {
				return fmt.Errorf("replace /%s with a directory: %w", mp, err)
			}
			err = unix.ENOENT
		}
		if errors.Is(err, unix.ENOENT) {
			if err := unix.Mkdirat(rootFd, mp, 0o755); err != nil {
				return fmt.Errorf("mkdir /%s: %w", mp, err)
			}
		} else if err != nil {
			return fmt.Errorf("stat /%s: %w", mp, err)
		}
		dfd, err := unix.Openat(rootFd, mp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /%s: %w", mp, err)
		}
		err = unix.Fchmod(dfd, mode)
		if err == nil && os.Geteuid() == 0 {
			err = unix.Fchown(dfd, 0, 0)
		}
		unix.Close(dfd)
		if err != nil {
			return fmt.Errorf("chmod /%s: %w", mp, err)
		}
	}
	for _, f := range []struct{ path, line string }{
		{"etc/passwd", sandboxPasswd},
		{"etc/group", sandboxGroup},
	} {
		old, err := readFileInRoot(rootFd, f.path)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		if err := writeFileInRoot(rootFd, f.path, withSandboxEntry(old, f.line), 0o644); err != nil {
			return err
		}
	}
	if err := writeFileInRoot(rootFd, "etc/hostname", []byte("sandbox\n"), 0o644); err != nil {
		return err
	}
	return writeFileInRoot(rootFd, "etc/hosts", []byte(hostsFile), 0o644)
}

// withSandboxEntry returns an /etc/passwd or /etc/group with any existing
// "sandbox" entry replaced by line.
func withSandboxEntry(old []byte, line string) []byte {
	var b strings.Builder
	for _, l := range strings.Split(string(old), "\n") {
		if l == "" || strings.HasPrefix(l, "sandbox:") {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(line)
	b.WriteByte('\n')
	return []byte(b.String())
}

// ReadPackages lists the Debian packages installed in tree (none when the
// tree has no dpkg database).
func ReadPackages(tree string) ([]Package, error) {
	rootFd, err := openTree(tree)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootFd)
	b, err := readFileInRoot(rootFd, "var/lib/dpkg/status")
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseDpkgStatus(strings.NewReader(string(b)))
}

// pythonVersion finds the tree's Python version without running anything in
// it: from the python3 package's version, else from a lib/python3.N dir.
func pythonVersion(tree string, pkgs []Package) string {
	for _, p := range pkgs {
		if p.Name == "python3" {
			return upstreamVersion(p.Version)
		}
	}
	best, bestMinor := "", -1
	for _, dir := range []string{"usr/local/lib", "usr/lib"} {
		ents, _ := os.ReadDir(filepath.Join(tree, dir))
		for _, e := range ents {
			minor, ok := strings.CutPrefix(e.Name(), "python3.")
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(minor); err == nil && n > bestMinor {
				best, bestMinor = e.Name()[len("python"):], n
			}
		}
	}
	return best
}

// parseDpkgStatus reads a dpkg status file and returns the installed
// packages in file order.
func parseDpkgStatus(r io.Reader) ([]Package, error) {
	var out []Package
	var name, version, status string
	flush := func() {
		if name != "" && strings.HasSuffix(status, " installed") {
			out = append(out, Package{Name: name, Version: version})
		}
		name, version, status = "", "", ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			flush()
		case strings.HasPrefix(l, "Package: "):
			name = strings.TrimSpace(l[len("Package: "):])
		case strings.HasPrefix(l, "Version: "):
			version = strings.TrimSpace(l[len("Version: "):])
		case strings.HasPrefix(l, "Status: "):
			status = strings.TrimSpace(l[len("Status: "):])
		}
	}
	flush()
	return out, sc.Err()
}

// removeTree deletes dir, refusing when anything is mounted at or below it
// (RemoveAll would otherwise recurse into a host /dev or /sys).
func removeTree(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	mounts, err := mountsUnder(f, dir)
	f.Close()
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("not removing %s: mounts still under it: %s (unmount them first)", dir, strings.Join(mounts, ", "))
	}
	return os.RemoveAll(dir)
}

// mountsUnder parses /proc/self/mountinfo and returns the mount points at or
// below dir. It streams the file rather than use procfs.GetMounts, which
// reads at most 1 MiB of it (about 8,000 mounts): this check must see every
// mount or RemoveAll may walk into one.
func mountsUnder(r io.Reader, dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
