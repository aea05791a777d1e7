// Package interrupt is what an interrupted bench (SIGTERM from
// timeout(1), ^C) does before it exits: it stops the private daemons it
// started, so that they remove their own cgroups, then removes the cgroups
// it named (nsbox-bench-<id>) and nothing else: what still runs in them is
// killed and the directories removed, deepest first, in every hierarchy.
// An interrupted bench used to die at once, leaving its daemons' cgroups
// (nsbox-bench-*/sp-*, pool-*, zy-*) where no later daemon looks.
package interrupt

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nsbox/nsbox/container"
)

// Stopper is a private daemon: Stop ends it (SIGTERM, and a kill after
// grace) and returns once it has exited.
type Stopper interface{ Stop(grace time.Duration) }

// What the bench started that must not outlive it.
var started struct {
	mu          sync.Mutex
	interrupted bool
	daemons     []Stopper
	names       []string // cgroup names given out (Name)
}

// Grace bounds a private daemon's drain at an interrupt (its runs are cut
// short, its sandboxes torn down) before it is killed.
const Grace = 15 * time.Second

// ErrInterrupted: the bench is being interrupted; start nothing more.
var ErrInterrupted = errors.New("bench: interrupted")

// Name gives out a cgroup name of the bench's own (for an engine in this
// process or a private daemon), remembered for Run.
func Name() string {
	name := "nsbox-bench-" + container.NewID()[:8]
	started.mu.Lock()
	started.names = append(started.names, name)
	started.mu.Unlock()
	return name
}

// Track remembers a private daemon that has started, unless the bench is
// being interrupted (ErrInterrupted: the caller stops it).
func Track(d Stopper) error {
	started.mu.Lock()
	defer started.mu.Unlock()
	if started.interrupted {
		return ErrInterrupted
	}
	started.daemons = append(started.daemons, d)
	return nil
}

// Run stops what this bench started, for a signal that ends it: its
// private daemons, each stopped at once (Stop(Grace)), so that they remove
// their own cgroups; then, as a backstop, the cgroups under the names Name
// gave out (and those alone): what runs in them (in-process engines'
// sandboxes, a killed daemon's) is killed and the directories removed. It
// returns the directories it could not remove. Safe while the bench runs.
func Run() (left []string) {
	started.mu.Lock()
	started.interrupted = true
	daemons, names := slices.Clone(started.daemons), slices.Clone(started.names)
	started.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range daemons {
		wg.Go(func() { d.Stop(Grace) })
	}
	wg.Wait()
	return Cgroups(Hierarchies(), names, 5*time.Second)
}
