package build

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/rootfs"
	"golang.org/x/sys/unix"
)

// chrootCmd runs name in tree with a fixed, minimal environment.
func chrootCmd(ctx context.Context, tree string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{tree, name}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"}, env...)
	return cmd
}

// toPurge returns the packages of want that are installed, in want's order.
func toPurge(installed []rootfs.Package, want []string) []string {
	have := make(map[string]bool, len(installed))
	for _, p := range installed {
		have[p.Name] = true
	}
	var out []string
	for _, w := range want {
		if have[w] {
			out = append(out, w)
			have[w] = false // once
		}
	}
	return out
}

// purgePackages removes the installed packages of want with dpkg --purge
// --force-depends (their dependents stay installed, with a dependency dpkg
// knows is unmet) and returns the ones it removed.
func purgePackages(ctx context.Context, tree string, want []string) ([]string, error) {
	pkgs, err := rootfs.ReadPackages(tree)
	if err != nil {
		return nil, fmt.Errorf("read package list: %w", err)
	}
	purge := toPurge(pkgs, want)
	if len(purge) == 0 {
		return nil, nil
	}
	args := append([]string{"--purge", "--force-depends"}, purge...)
	if out, err := chrootCmd(ctx, tree, nil, "dpkg", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: dpkg --purge in the new tree: %v: %s", ErrBuildFailed, err, lastLine(strings.TrimSpace(string(out))))
	}
	after, err := rootfs.ReadPackages(tree)
	if err != nil {
		return nil, fmt.Errorf("read package list: %w", err)
	}
	if left := toPurge(after, purge); len(left) > 0 {
		return nil, fmt.Errorf("%w: dpkg left %s installed", ErrBuildFailed, strings.Join(left, ", "))
	}
	return purge, nil
}

// hardenTree clears the setuid and setgid bits of every regular file in tree
// (no_new_privs makes them inert in a sandbox anyway) and deletes device
// nodes, fifos and sockets (the engine mounts a fresh /dev). It returns the
// tree-relative paths it changed, sorted. Symlinks are never followed.
func hardenTree(tree string) (setid, devices []string, err error) {
	err = filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tree, p)
		switch t := d.Type(); {
		case t&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0:
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("remove device node: %w", err)
			}
			devices = append(devices, rel)
		case t.IsRegular():
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return &os.PathError{Op: "lstat", Path: p, Err: err}
			}
			if st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
				return nil
			}
			// Fchmodat cannot refuse symlinks; an O_PATH|O_NOFOLLOW fd
			// pins the regular file WalkDir saw.
			fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return &os.PathError{Op: "open", Path: p, Err: err}
			}
			err = unix.Fchmodat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), st.Mode&0o1777, 0)
			unix.Close(fd)
			if err != nil {
				return &os.PathError{Op: "chmod", Path: p, Err: err}
			}
			setid = append(setid, rel)
		}
		return nil
	})
	sort.Strings(setid)
	sort.Strings(devices)
	return setid, devices, err
}

// fontCacheDir is where a build puts matplotlib's font cache in the tree.
const fontCacheDir = "/usr/share/nsbox/matplotlib"

// fontCacheHook is appended to the tree's sitecustomize.py. matplotlib only
// uses a cache dir it can write to, and a sandbox's HOME starts empty, so the
// first "import matplotlib" of a process copies the prebuilt fontlist-*.json
// into the dir matplotlib will use when it is missing there. Until then the
// hook is one finder on sys.meta_path that declines every import; a process
// that never imports matplotlib leaves no file behind.
const fontCacheHook = `
# nsbox: seed matplotlib's font cache from the one built with the rootfs, so
# that the first plot in an empty HOME does not rebuild it.
class _NsboxMplCacheSeed:
    src = "` + fontCacheDir + `"

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "matplotlib":
            return None
        import os, sys
        try:
            sys.meta_path.remove(cls)
        except ValueError:
            pass
        try:
            names = [n for n in os.listdir(cls.src) if n.startswith("fontlist-")]
            dst = os.environ.get("MPLCONFIGDIR")
            if not dst:
                dst = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                   os.path.join(os.path.expanduser("~"), ".cache"), "matplotlib")
            for n in names:
                if os.path.exists(os.path.join(dst, n)):
                    continue
                os.makedirs(dst, exist_ok=True)
                with open(os.path.join(cls.src, n), "rb") as f:
                    data = f.read()
                tmp = os.path.join(dst, ".%s.%d" % (n, os.getpid()))
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, os.path.join(dst, n))
        except Exception:
            pass
        return None


def _nsbox_hook_mpl_cache():
    import os, sys
    if os.path.isdir(_NsboxMplCacheSeed.src):
        sys.meta_path.insert(0, _NsboxMplCacheSeed)


_nsbox_hook_mpl_cache()
del _nsbox_hook_mpl_cache
`

// buildFontCache builds matplotlib's font cache into fontCacheDir, hooks the
// tree's sitecustomize.py to seed it into a sandbox's cache dir and
// byte-compiles the hook (sandboxes do not write bytecode).
func buildFontCache(ctx context.Context, tree string) error {
	if err := os.MkdirAll(filepath.Join(tree, fontCacheDir), 0o755); err != nil {
		return err
	}
	out, err := chrootCmd(ctx, tree, []string{"HOME=/nonexistent", "MPLBACKEND=Agg", "MPLCONFIGDIR=" + fontCacheDir},
		"python3", "-I", "-B", "-c", "import matplotlib.font_manager as fm; fm.fontManager.findfont('DejaVu Sans')").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: build matplotlib font cache: %v: %s", ErrBuildFailed, err, lastLine(strings.TrimSpace(string(out))))
	}
	ents, _ := os.ReadDir(filepath.Join(tree, fontCacheDir))
	var found bool
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "fontlist-") && strings.HasSuffix(e.Name(), ".json") {
			found = true
		} else if err := os.RemoveAll(filepath.Join(tree, fontCacheDir, e.Name())); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%w: matplotlib wrote no fontlist-*.json to %s", ErrBuildFailed, fontCacheDir)
	}
	site, err := sitecustomizePath(tree)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(filepath.Join(tree, site))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if !bytes.Contains(old, []byte("_NsboxMplCacheSeed")) {
		if err := os.WriteFile(filepath.Join(tree, site), append(old, fontCacheHook...), 0o644); err != nil {
			return err
		}
	}
	out, err = chrootCmd(ctx, tree, []string{"HOME=/nonexistent"}, "python3", "-I", "-B", "-c",
		"import py_compile, sitecustomize; py_compile.compile(sitecustomize.__file__, doraise=True)").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: byte-compile %s: %v: %s", ErrBuildFailed, site, err, lastLine(strings.TrimSpace(string(out))))
	}
	return nil
}

// sitecustomizePath returns the tree-relative file Python imports as
// sitecustomize: Debian's /usr/lib/python3.N/sitecustomize.py is a link to
// /etc/python3.N/sitecustomize.py; without one, a new file in dist-packages.
func sitecustomizePath(tree string) (string, error) {
	links, _ := filepath.Glob(filepath.Join(tree, "usr/lib/python3.*/sitecustomize.py"))
	if len(links) > 0 {
		l := links[0] // one Python per tree
		target, err := os.Readlink(l)
		if err != nil {
			rel, _ := filepath.Rel(tree, l)
			return rel, nil // a plain file
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join("/", filepath.Dir(strings.TrimPrefix(l, tree)), target)
		}
		// Clean of an absolute path cannot climb above "/": the tree's root.
		rel := strings.TrimPrefix(filepath.Clean(target), "/")
		if st, err := os.Lstat(filepath.Join(tree, rel)); err != nil || !st.Mode().IsRegular() {
			return "", fmt.Errorf("%w: %s -> %s is not a regular file in the tree", ErrBuildFailed, l, target)
		}
		return rel, nil
	}
	return "usr/lib/python3/dist-packages/sitecustomize.py", nil
}

// trimTree removes what no sandbox needs: the profile's purge packages
// (dpkg --purge, so the package list stays true), apt caches and lists, logs,
// debconf templates, man/info/locale leftovers, the test suites shipped
// inside big Python packages; then it clears setuid/setgid bits and deletes
// device nodes. The returned rootfs.Trim lists all of it.
func trimTree(ctx context.Context, tree string, prof profile, progress func(rootfs.Progress)) (*rootfs.Trim, error) {
	before := treeSize(tree)
	trim := &rootfs.Trim{
		Excluded:    append(commonExcludes(), prof.exclude...),
		Included:    commonIncludes(),
		BytesBefore: before,
	}
	progress(rootfs.Progress{Phase: "trim", Percent: -1, Message: fmt.Sprintf("tree is %s before trimming", rootfs.HumanSize(before))})
	if len(prof.purge) > 0 {
		progress(rootfs.Progress{Phase: "trim", Percent: -1, Message: "dpkg --purge build-only packages"})
		purged, err := purgePackages(ctx, tree, prof.purge)
		if err != nil {
			return nil, err
		}
		trim.Purged = purged
	}
	var paths []string
	for _, g := range []string{
		"var/cache/apt/*", "var/lib/apt/lists/*", "var/cache/debconf/*-old",
		"var/cache/debconf/templates.dat", "var/log/*", "usr/share/man/*",
		"usr/share/info/*", "usr/share/locale/*", "usr/share/lintian/*",
	} {
		m, _ := filepath.Glob(filepath.Join(tree, g))
		paths = append(paths, m...)
	}
	for _, pkg := range prof.trimTests {
		root := filepath.Join(tree, "usr/lib/python3/dist-packages", pkg)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == "tests") {
				paths = append(paths, p)
				return filepath.SkipDir
			}
			return nil
		})
	}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(p); err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(tree, p)
		trim.Removed = append(trim.Removed, rel)
	}
	setid, devices, err := hardenTree(tree)
	if err != nil {
		return nil, err
	}
	trim.StrippedSetid, trim.RemovedDevices = setid, devices
	progress(rootfs.Progress{Phase: "trim", Percent: -1, Message: fmt.Sprintf("stripped setuid/setgid bits of %d files, removed %d device nodes", len(setid), len(devices))})
	after := treeSize(tree)
	progress(rootfs.Progress{Phase: "trim", Percent: 100, Message: fmt.Sprintf("trimmed %s -> %s (%d packages purged)", rootfs.HumanSize(before), rootfs.HumanSize(after), len(trim.Purged))})
	return trim, nil
}

func treeSize(tree string) int64 {
	var n int64
	seen := map[uint64]bool{}
	filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
					seen[st.Ino] = true
					n += info.Size()
				}
			}
		}
		return nil
	})
	return n
}
