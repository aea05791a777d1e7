package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Host ids of sandboxes come from a dedicated range. Slot s owns two host
// ids: UIDBase+2s (in-sandbox root, used only by init) and UIDBase+2s+1 (the
// sandbox user, uid/gid 1000 inside). A slot is held by an exclusive flock on
// <LockDir>/uid-<s>.lock for the sandbox's whole life, so two live sandboxes
// never share a host uid, across engines and processes, and a crashed
// holder's slot frees itself.
const (
	UIDBase     = 0x50000000 // 1342177280
	UIDSlots    = 1 << 15
	SandboxUID  = 1000
	SandboxGID  = 1000
	uidsPerSlot = 2
)

type uidSlot struct {
	n    int
	lock *os.File
}

func (s *uidSlot) rootID() int { return UIDBase + uidsPerSlot*s.n }
func (s *uidSlot) userID() int { return UIDBase + uidsPerSlot*s.n + 1 }

func (s *uidSlot) release() {
	if s.lock != nil {
		s.lock.Close() // drops the flock
		s.lock = nil
	}
}

type uidAllocator struct {
	dir  string
	next atomic.Uint32
}

func (a *uidAllocator) acquire() (*uidSlot, error) {
	start := int(a.next.Add(1))
	for i := range UIDSlots {
		n := (start + i) % UIDSlots
		f, err := lockFile(filepath.Join(a.dir, fmt.Sprintf("uid-%d.lock", n)))
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue
		}
		if err != nil {
			return nil, err
		}
		a.next.Store(uint32(n))
		return &uidSlot{n: n, lock: f}, nil
	}
	return nil, ErrNoUIDs
}

// lockFile opens (creating) path and takes an exclusive, non-blocking flock.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Zygotes take their ids from a range of their own, a block of
// zygoteBlockIDs per zygote: the block's first id is the zygote's root and
// the rest are its children's sandbox users, one per live child. A block is
// held by an exclusive flock on <LockDir>/zygote-uid-<b>.lock.
const (
	ZygoteUIDBase  = 0x60000000 // 1610612736
	ZygoteBlocks   = 1 << 12
	zygoteBlockIDs = 1024
	// MaxZygoteChildren is the most children one zygote can have alive.
	MaxZygoteChildren = zygoteBlockIDs - 1
	// zygoteChildIDs is where the children's ids start inside the
	// zygote's user namespace (zygote.py's ZYGOTE_UID_BASE).
	zygoteChildIDs = 100000
)

type zygoteBlock struct {
	n    int
	lock *os.File
}

func (b *zygoteBlock) rootID() int       { return ZygoteUIDBase + zygoteBlockIDs*b.n }
func (b *zygoteBlock) childID(i int) int { return b.rootID() + 1 + i }

func (b *zygoteBlock) release() {
	if b.lock != nil {
		b.lock.Close()
		b.lock = nil
	}
}

func (a *uidAllocator) acquireZygoteBlock() (*zygoteBlock, error) {
	for n := range ZygoteBlocks {
		f, err := lockFile(filepath.Join(a.dir, fmt.Sprintf("zygote-uid-%d.lock", n)))
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &zygoteBlock{n: n, lock: f}, nil
	}
	return nil, ErrNoUIDs
}
