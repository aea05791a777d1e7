package sandboxinit

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MaxPtys bounds the terminals one sandbox can open at once: its devpts
// instance's max (ENOSPC past it), so a loop of openpty cannot use up
// the host's kernel.pty.max, which every devpts instance shares.
const MaxPtys = 64

// setupPts mounts a devpts instance of the sandbox's own at /dev/pts,
// with /dev/ptmx a link to its ptmx (as runc does): the terminals a
// sandbox opens (a PTY the process agent starts a shell on) are numbered
// and seen in it alone, never the host's /dev/pts or another sandbox's.
// Slaves are 0620, their owner the sandbox's user; nothing outside the
// sandbox's mount namespace sees them.
func setupPts(dev string) error {
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return fmt.Errorf("mkdir /dev/pts: %w", err)
	}
	opts := fmt.Sprintf("newinstance,ptmxmode=0666,mode=0620,max=%d", MaxPtys)
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := os.Symlink("pts/ptmx", filepath.Join(dev, "ptmx")); err != nil {
		return fmt.Errorf("link /dev/ptmx: %w", err)
	}
	return nil
}
