// Package leftovers takes back the sandbox cgroups a dead engine left
// behind: the engine's Recover, at its start.
package leftovers

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container/internal/locks"
)

// StaleAge is how long a lock file or a cgroup nobody names must have been
// left alone before Sweep deletes it: a new liveness lock may be between
// its creation and its flock, a new cgroup between its creation and its
// first process.
const StaleAge = time.Minute

// Sweep removes the sandbox cgroups under cg's parent that a dead engine
// left, and reports how many it removed:
//   - one whose liveness lock in liveDir is free, or held from within the
//     sandbox only (locks.Reclaim), is killed and removed;
//   - one whose lock is held outside it belongs to a live engine: left;
//   - one with no lock in liveDir is another run dir's, or a dead engine's
//     whose run dir is gone (a test's or a conformance run's temporary
//     one): removed once no process is in it and it has not changed for
//     StaleAge, never killed (cgroup.Manager.RemoveIdle). A live engine's
//     sandbox always has its process in it but for the moment it is made
//     and the moment its result is collected.
//
// Then it deletes the free lock files left in liveDir and the host-wide
// lockDir.
func Sweep(cg *cgroup.Manager, liveDir, lockDir string, log *slog.Logger) (int, error) {
	ids, err := cg.Leftovers()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		lock, err := locks.Reclaim(locks.LivePath(liveDir, id), func() ([]int, error) { return cg.Pids(id) })
		if errors.Is(err, os.ErrNotExist) {
			removed, err := cg.RemoveIdle(id, StaleAge)
			if err != nil {
				errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
			} else if removed {
				n++
				log.Info("removed a leftover sandbox cgroup no engine names", "id", id)
			}
			continue
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue // alive
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cg.Remove(id); err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
		} else {
			n++
			log.Info("removed leftover sandbox", "id", id)
		}
		os.Remove(lock.Name())
		lock.Close()
	}
	locks.RemoveStale(lockDir, liveDir, StaleAge)
	return n, errors.Join(errs...)
}
