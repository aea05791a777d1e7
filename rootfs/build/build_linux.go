package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/rootfs"
	"golang.org/x/sys/unix"
)

// Options says what to build. Zero fields take defaults.
type Options struct {
	Name    string // default rootfs.DefaultName
	Profile string // one of Profiles(), default DefaultProfile
	Mirror  string // default DefaultMirror
	Suite   string // default DefaultSuite
	Force   bool   // replace an existing rootfs of that name
}

// The defaults of Options, also the CLI's.
const (
	DefaultMirror  = "http://deb.debian.org/debian"
	DefaultSuite   = "bookworm"
	DefaultProfile = "datasci"
)

// Run makes a rootfs from Debian packages with mmdebstrap and installs it
// in the store atomically (Store.Create). progress (may be nil) is called
// from the calling goroutine's children; cancel ctx to stop: mmdebstrap is
// killed and the temporary tree removed.
func Run(ctx context.Context, s rootfs.Store, o Options, progress func(rootfs.Progress)) (*rootfs.Rootfs, error) {
	if o.Name == "" {
		o.Name = rootfs.DefaultName
	}
	if o.Profile == "" {
		o.Profile = DefaultProfile
	}
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if o.Suite == "" {
		o.Suite = DefaultSuite
	}
	if err := rootfs.ValidName(o.Name); err != nil {
		return nil, err
	}
	prof, err := lookupProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	mmdebstrap, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return nil, ErrNoMmdebstrap
	}
	if progress == nil {
		progress = func(rootfs.Progress) {}
	}
	return s.Create(ctx, o.Name, o.Force, progress, func(ctx context.Context, tree string) (rootfs.Meta, error) {
		m := rootfs.Meta{Profile: o.Profile, Suite: o.Suite, Mirror: o.Mirror}
		if err := runMmdebstrap(ctx, mmdebstrap, tree, o, prof, progress); err != nil {
			return m, err
		}
		trim, err := trimTree(ctx, tree, prof, progress)
		if err != nil {
			return m, fmt.Errorf("trim: %w", err)
		}
		m.Trim = trim
		if prof.fontCache {
			progress(rootfs.Progress{Phase: "customize", Percent: -1, Message: "matplotlib font cache in " + fontCacheDir})
			if err := buildFontCache(ctx, tree); err != nil {
				return m, err
			}
			trim.FontCache = fontCacheDir
		}
		progress(rootfs.Progress{Phase: "check", Percent: -1, Message: "python3 imports in the new tree"})
		v, err := checkPython(ctx, tree, prof)
		if err != nil {
			return m, err
		}
		m.Python = v
		if prof.has("nodejs") {
			progress(rootfs.Progress{Phase: "check", Percent: -1, Message: "node and esbuild in the new tree"})
			if err := checkNode(ctx, tree, prof); err != nil {
				return m, err
			}
		}
		if prof.shellCheck != "" {
			progress(rootfs.Progress{Phase: "check", Percent: -1, Message: "R and Java in the new tree"})
			if err := checkShell(ctx, tree, prof.shellCheck); err != nil {
				return m, err
			}
		}
		return m, nil
	})
}

func mmdebstrapArgs(tree string, o Options, prof profile) []string {
	args := []string{
		"--mode=root", "--variant=apt", "--format=directory",
		"--include=" + strings.Join(prof.packages, ","),
		`--aptopt=APT::Install-Recommends "false"`,
		`--aptopt=Acquire::Retries "3"`,
	}
	for _, p := range append(commonExcludes(), prof.exclude...) {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	for _, p := range commonIncludes() {
		args = append(args, "--dpkgopt=path-include="+p)
	}
	for _, d := range prof.dirs {
		args = append(args, `--setup-hook=mkdir -p "$1"`+d)
	}
	return append(args, o.Suite, tree, o.Mirror)
}

// runMmdebstrap runs mmdebstrap on a pty (it draws progress bars only on a
// terminal) in a private mount namespace (its /proc, /sys and /dev mounts
// inside the tree can never outlive it).
func runMmdebstrap(ctx context.Context, bin, tree string, o Options, prof profile, progress func(rootfs.Progress)) error {
	master, slave, err := openPty()
	if err != nil {
		return fmt.Errorf("open pty for mmdebstrap: %w", err)
	}
	defer master.Close()
	cmd := exec.Command(bin, mmdebstrapArgs(tree, o, prof)...)
	cmd.Stdout, cmd.Stderr = slave, slave
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "DEBIAN_FRONTEND=noninteractive")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS}
	progress(rootfs.Progress{Phase: "setup", Percent: -1, Message: "mmdebstrap " + o.Suite + " from " + o.Mirror})
	if err := cmd.Start(); err != nil {
		slave.Close()
		return fmt.Errorf("start mmdebstrap: %w", err)
	}
	slave.Close()
	pgid := cmd.Process.Pid

	var parser *mmdebstrapParser
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		parser = parseMmdebstrap(master, progress)
	}()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		// mmdebstrap cleans up on SIGTERM; give it a moment, then kill all.
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case waitErr = <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			waitErr = <-done
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL) // stragglers holding the pty
	// Read what is left, but never hang on a process outside our group.
	readDone := make(chan struct{})
	go func() { wg.Wait(); close(readDone) }()
	select {
	case <-readDone:
	case <-time.After(5 * time.Second):
		master.Close()
		<-readDone
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if waitErr != nil {
		detail, kind := parser.failure()
		switch kind {
		case ErrMirrorUnreachable:
			return fmt.Errorf("%w: %s (%s): check the URL and the network, or pass --mirror", kind, o.Mirror, detail)
		case rootfs.ErrNoSpace:
			return fmt.Errorf("%w (%s)", kind, detail)
		}
		return fmt.Errorf("%w: mmdebstrap: %v: %s", ErrBuildFailed, waitErr, detail)
	}
	return nil
}

func openPty() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	var n uint32
	rc, err := master.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
				n, err = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 100}); err != nil {
		master.Close()
		slave.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
