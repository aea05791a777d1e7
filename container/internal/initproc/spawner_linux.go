package initproc

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/cgroup"
)

// errSpawnerClosed: the spawner's thread is gone; the caller clones the
// init itself and places it afterwards.
var errSpawnerClosed = errors.New("spawner closed")

// Spawner clones inits on v1 cgroups from an OS thread of its own, so that
// they are born in their cgroups. Moving an init into its v1 cgroup waits
// for an RCU grace period after an idle spell (9-12 ms here, the largest
// part of a cold start); a thread that moves itself does not (~20 µs), and
// a child starts in the cgroups of the thread that cloned it. The thread
// lives in the cgroup parent (Manager.EnterThread), which nsbox created,
// steps into the new sandbox cgroup, clones, and steps back before the
// cgroup is handed on, so no one ever sees it there but the clone.
//
// The thread is not the thread group leader (whose v1 memory cgroup the
// whole process's memory is charged to). It starts with the first Spawn
// and lives until Close: an init's parent-death signal fires when the
// thread that cloned it exits.
type Spawner struct {
	m    *cgroup.Manager
	log  *slog.Logger
	reqs chan spawnReq
	quit chan struct{}
	done chan struct{} // closed when the thread has ended (or never will start)
	tid  int

	startOnce sync.Once
	closeOnce sync.Once
}

type spawnReq struct {
	cg    *cgroup.Cgroup
	clone func() error
	res   chan error
}

// NewSpawner returns a spawner whose thread will live in m's cgroup parent.
func NewSpawner(m *cgroup.Manager, log *slog.Logger) *Spawner {
	return &Spawner{m: m, log: log, reqs: make(chan spawnReq), quit: make(chan struct{}), done: make(chan struct{})}
}

// loop runs on the spawner's thread. held, when set, is closed once this
// goroutine has a thread locked: a goroutine that got the main thread
// holds on to it until then, so that this one gets another.
func (s *Spawner) loop(ready chan<- error, held chan struct{}) {
	runtime.LockOSThread()
	if held != nil {
		close(held)
	}
	if unix.Gettid() == unix.Getpid() {
		h := make(chan struct{})
		go s.loop(ready, h)
		<-h
		runtime.UnlockOSThread()
		return
	}
	// From here on the goroutine never unlocks: when it returns, the
	// thread exits with it, and takes its cgroups with it.
	defer close(s.done)
	if err := s.m.EnterThread(); err != nil {
		ready <- err
		return
	}
	s.tid = unix.Gettid()
	ready <- nil
	for {
		select {
		case <-s.quit:
			return
		case r := <-s.reqs:
			err := r.cg.EnterThread()
			if err == nil {
				err = r.clone()
			}
			if herr := s.m.EnterThread(); herr != nil {
				// The thread can't leave the sandbox cgroup: it must
				// not live on in it. Its inits die with it.
				r.res <- errors.Join(err, fmt.Errorf("spawner thread: back to the cgroup parent: %w", herr))
				return
			}
			r.res <- err
		}
	}
}

// Spawn runs clone on the spawner's thread while the thread is in cg, so
// that the child clone makes starts there. errSpawnerClosed: nothing ran.
func (s *Spawner) Spawn(cg *cgroup.Cgroup, clone func() error) error {
	s.startOnce.Do(func() {
		ready := make(chan error, 1)
		go s.loop(ready, nil)
		if err := <-ready; err != nil {
			s.log.Warn("spawner thread: inits will be moved into their cgroups", "err", err)
		}
	})
	r := spawnReq{cg: cg, clone: clone, res: make(chan error, 1)}
	select {
	case s.reqs <- r:
		return <-r.res
	case <-s.done:
		return errSpawnerClosed
	}
}

// Close ends the spawner's thread, if it started, and waits until it is
// gone from the cgroup parent. Every init it cloned that is still alive gets its
// parent-death signal (SIGKILL). Safe more than once.
func (s *Spawner) Close() {
	s.closeOnce.Do(func() { close(s.quit) })
	s.startOnce.Do(func() { close(s.done) }) // never started
	<-s.done
	if s.tid == 0 {
		return
	}
	task := "/proc/self/task/" + strconv.Itoa(s.tid)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return
		}
	}
}
