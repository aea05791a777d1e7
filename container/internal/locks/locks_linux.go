// Package locks hands out what engines on one host must never share: host
// uid slots for sandboxes and id blocks for zygotes, and a liveness lock per
// sandbox. Each is an exclusive flock on a file, held for the sandbox's
// whole life, so it spans engines and processes and a crashed holder's
// locks free themselves. Slots and blocks live in Dir, one directory for
// the whole host; liveness locks live in each engine's own directory.
package locks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/procfd"
)

// Dir holds the uid-slot and zygote-block locks of every engine on the
// host, whatever its RunDir, so that engines never hand out the same host
// uid.
const Dir = "/run/nsbox/locks"

// ErrNoUIDs reports that every slot (or block) is held.
var ErrNoUIDs = errors.New("no free host uid slot")

// Host ids of sandboxes come from a dedicated range. Slot s owns two host
// ids: UIDBase+2s (in-sandbox root, used only by init) and UIDBase+2s+1 (the
// sandbox user, uid/gid 1000 inside). A slot is held by an exclusive flock on
// <Dir>/uid-<s>.lock for the sandbox's whole life, so two live sandboxes
// never share a host uid.
const (
	UIDBase     = 0x50000000 // 1342177280
	UIDSlots    = 1 << 15
	SandboxUID  = 1000
	SandboxGID  = 1000
	uidsPerSlot = 2
)

// Slot is a held uid slot.
type Slot struct {
	n    int
	lock *os.File
}

// RootID is the host id of the slot's in-sandbox root.
func (s *Slot) RootID() int { return UIDBase + uidsPerSlot*s.n }

// UserID is the host id of the slot's sandbox user.
func (s *Slot) UserID() int { return UIDBase + uidsPerSlot*s.n + 1 }

// Release frees the slot and removes its lock file.
func (s *Slot) Release() {
	unlock(s.lock)
	s.lock = nil
}

// Allocator hands out slots and blocks from the lock files in Dir.
type Allocator struct {
	Dir  string
	next atomic.Uint32
}

// Acquire takes a free uid slot.
func (a *Allocator) Acquire() (*Slot, error) {
	start := int(a.next.Add(1))
	for i := range UIDSlots {
		n := (start + i) % UIDSlots
		f, err := Linked(filepath.Join(a.Dir, fmt.Sprintf("uid-%d.lock", n)))
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue
		}
		if err != nil {
			return nil, err
		}
		a.next.Store(uint32(n))
		return &Slot{n: n, lock: f}, nil
	}
	return nil, ErrNoUIDs
}

// File opens (creating) path and takes an exclusive, non-blocking flock
// (EWOULDBLOCK when another holds it).
func File(path string) (*os.File, error) { return lock(path, os.O_CREATE) }

func lock(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW|flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Linked is File for a lock whose file its holder removes on release
// (unlock): the flock counts only while path still names the file locked.
// A contender that opened the file just before it was removed, and locked
// it just after, holds a lock on a file nobody else can reach, while a
// third creates a new one at path; so it checks, and takes that as held
// (EWOULDBLOCK). The check is one fstat and one stat.
func Linked(path string) (*os.File, error) { return linked(lock(path, os.O_CREATE)) }

// Existing is Linked for a file that must already be there (else an error
// that is os.ErrNotExist).
func Existing(path string) (*os.File, error) { return linked(lock(path, 0)) }

func linked(f *os.File, err error) (*os.File, error) {
	if err != nil {
		return nil, err
	}
	path := f.Name()
	var held, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(path, &named) != nil || held.Ino != named.Ino || held.Dev != named.Dev {
		f.Close()
		return nil, unix.EWOULDBLOCK
	}
	return f, nil
}

// unlock removes a Linked lock's file while still holding it, then drops
// the lock: the file goes with the slot, so none pile up. Safe on nil.
func unlock(f *os.File) {
	if f != nil {
		os.Remove(f.Name())
		f.Close()
	}
}

// Zygotes take their ids from a range of their own, a block of
// BlockIDs per zygote: the block's first id is the zygote's root and
// the rest are its children's sandbox users, one per live child. A block is
// held by an exclusive flock on <Dir>/zygote-uid-<b>.lock.
const (
	ZygoteUIDBase = 0x60000000 // 1610612736
	ZygoteBlocks  = 1 << 12
	BlockIDs      = 1024
	// MaxZygoteChildren is the most children one zygote can have alive.
	MaxZygoteChildren = BlockIDs - 1
	// ZygoteChildIDs is where the children's ids start inside the
	// zygote's user namespace (zygote.py's ZYGOTE_UID_BASE).
	ZygoteChildIDs = 100000
)

// Block is a held zygote id block.
type Block struct {
	n    int
	lock *os.File
}

// RootID is the host id of the zygote's root.
func (b *Block) RootID() int { return ZygoteUIDBase + BlockIDs*b.n }

// ChildID is the host id of the sandbox user of the child in slot i.
func (b *Block) ChildID(i int) int { return b.RootID() + 1 + i }

// Release frees the block and removes its lock file.
func (b *Block) Release() {
	unlock(b.lock)
	b.lock = nil
}

// AcquireBlock takes a free zygote id block.
func (a *Allocator) AcquireBlock() (*Block, error) {
	for n := range ZygoteBlocks {
		f, err := Linked(filepath.Join(a.Dir, fmt.Sprintf("zygote-uid-%d.lock", n)))
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Block{n: n, lock: f}, nil
	}
	return nil, ErrNoUIDs
}

// Live is a sandbox's liveness lock: held while the sandbox lives, so that
// a successor engine's Recover leaves it alone. It lives in its engine's
// own directory (<RunDir>/locks): Recover looks there, and only there.
type Live struct{ f *os.File }

// LivePath is the liveness lock file of sandbox id in dir.
func LivePath(dir, id string) string { return filepath.Join(dir, "sandbox-"+id+".lock") }

// AcquireLive takes sandbox id's liveness lock in dir.
func AcquireLive(dir, id string) (*Live, error) {
	f, err := File(LivePath(dir, id))
	if err != nil {
		return nil, fmt.Errorf("liveness lock: %w", err)
	}
	return &Live{f: f}, nil
}

// Reclaim is Existing for a dead engine's liveness lock: a lock held, but
// open in no process outside the sandbox (inside lists its processes: its
// cgroup's), is its too, and is returned opened but not locked. A process
// keeps copies of its engine's fds between its clone and its exec, and
// one frozen there holds them for as long as it is (44eb33d: a kill's
// freeze left in place); a live engine holds its locks in its own process.
func Reclaim(path string, inside func() ([]int, error)) (*os.File, error) {
	f, err := Existing(path)
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return f, err
	}
	id, ok := procfd.Of(path)
	pids, perr := inside()
	if !ok || perr != nil {
		return nil, err
	}
	holders := procfd.Holders(map[procfd.ID]bool{id: true})
	for _, p := range holders {
		if !slices.Contains(pids, p) {
			return nil, err
		}
	}
	if len(holders) == 0 {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
}

// Release removes the lock file and drops the lock. Safe on nil.
func (l *Live) Release() {
	if l != nil && l.f != nil {
		unlock(l.f)
		l.f = nil
	}
}

// Drop drops the lock but keeps its file, for a sandbox whose cgroup could
// not be removed: the next engine's Recover finds the file free and
// removes the cgroup. Safe on nil.
func (l *Live) Drop() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// RemoveStale deletes, in the host-wide dir, slot and block lock files that
// nobody holds (crashed holders leave theirs), and in an engine's liveDir,
// liveness lock files that nobody holds and that are older than age: their
// sandboxes are gone. A new liveness lock may be between its creation and
// its flock: age spares it. A slot's file needs no age: its taker checks
// (Linked) that the file it locked is still there.
func RemoveStale(dir, liveDir string, age time.Duration) {
	for _, pat := range []string{filepath.Join(dir, "uid-*.lock"), filepath.Join(dir, "zygote-uid-*.lock"), filepath.Join(liveDir, "sandbox-*.lock")} {
		paths, _ := filepath.Glob(pat)
		for _, p := range paths {
			st, err := os.Lstat(p)
			if err != nil || !st.Mode().IsRegular() || filepath.Dir(p) == liveDir && time.Since(st.ModTime()) < age {
				continue
			}
			if lock, err := Existing(p); err == nil {
				unlock(lock) // free: its holder is gone
			}
		}
	}
}
