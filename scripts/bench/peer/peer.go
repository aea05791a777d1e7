// Package peer runs the command the bench measures in the systems nsbox is
// set beside: bubblewrap, the OCI runtimes (runc, crun, gVisor's runsc)
// and podman, each on the same rootfs.
package peer

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Quiet runs cmd and returns its error with its output, which it
// otherwise drops.
func Quiet(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Bwrap is the baseline: bubblewrap with every namespace unshared,
// the same rootfs read-only, fresh /proc, /dev and /tmp, uid 1000.
func Bwrap(ctx context.Context, root string, argv []string) *exec.Cmd {
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/workspace",
		"--uid", "1000", "--gid", "1000", "--",
	}
	return exec.CommandContext(ctx, "bwrap", append(args, argv...)...)
}
