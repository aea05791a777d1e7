package peer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/container"
)

// Podman is what a Docker user would pick here: `podman run --rm`
// of an image imported from the same rootfs, on a private podman store
// (overlay, as a Docker user's; its own run root) and a cgroup parent of
// its own, all removed at the end. runc, because crun refuses hybrid cgroup layouts; the
// ulimits set to what the host allows (root here cannot raise them).
type Podman struct {
	dir    string
	base   []string
	parent string // the containers' cgroup parent
	argv   []string
}

const podmanImage = "localhost/nsbox-bench:latest"

// NewPodman imports the rootfs as an image into a private store and tries one run.
func NewPodman(ctx context.Context, root string, argv []string) (*Podman, error) {
	for _, b := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("not installed (apt-get install podman runc)")
		}
	}
	// Short: podman refuses a run root longer than 50 characters.
	dir, err := os.MkdirTemp("", "nsbox-bp-")
	if err != nil {
		return nil, err
	}
	b := &Podman{dir: dir, parent: "/nsbox-bench-podman-" + container.NewID()[:6], argv: argv,
		base: []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "rr"), "--tmpdir", filepath.Join(dir, "tmp"),
			"--storage-driver", "overlay", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc"}}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		b.Close()
		return nil, err
	}
	tar := exec.CommandContext(ctx, "tar", "-C", root, "-c", ".")
	imp := exec.CommandContext(ctx, "podman", append(append([]string{}, b.base...), "import", "-", podmanImage)...)
	pipe, err := tar.StdoutPipe()
	if err != nil {
		b.Close()
		return nil, err
	}
	imp.Stdin = pipe
	if err := tar.Start(); err != nil {
		b.Close()
		return nil, err
	}
	out, ierr := imp.CombinedOutput()
	terr := tar.Wait()
	if err := errors.Join(ierr, terr); err != nil {
		b.Close()
		return nil, fmt.Errorf("podman import: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := b.Run(ctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("cannot run here: %v", err)
	}
	return b, nil
}

// Run runs the command once in a new container.
func (b *Podman) Run(ctx context.Context) error {
	args := append(append([]string{}, b.base...), "run", "--rm", "--network", "none", "--read-only", "--user", "1000:1000",
		"--cgroup-parent", b.parent, "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", podmanImage)
	return Quiet(exec.CommandContext(ctx, "podman", append(args, b.argv...)...))
}

// Close removes the private store (its overlay mounts too) and the
// cgroup parent (podman leaves its conmon cgroup there).
func (b *Podman) Close() {
	_ = exec.Command("podman", append(append([]string{}, b.base...), "system", "reset", "--force")...).Run()
	mounts, _ := mountsUnder(b.dir)
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = exec.Command("umount", "-l", mounts[i]).Run()
	}
	os.RemoveAll(b.dir)
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range append(hier, "/sys/fs/cgroup") {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, b.parent), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

// mountsUnder lists the mount points under dir (/proc/self/mountinfo).
func mountsUnder(dir string) ([]string, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out, nil
}
