package container

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/nsbox/nsbox/container/internal/locks"
)

// Host ids of sandboxes (package locks hands them out). Slot s owns two
// host ids: UIDBase+2s (in-sandbox root, used only by init) and UIDBase+2s+1
// (the sandbox user, uid/gid 1000 inside). Zygotes take blocks of ids from
// ZygoteUIDBase on: the block's first id is the zygote's root, the rest are
// its children's sandbox users, one per live child.
const (
	UIDBase       = locks.UIDBase
	UIDSlots      = locks.UIDSlots
	SandboxUID    = locks.SandboxUID
	SandboxGID    = locks.SandboxGID
	ZygoteUIDBase = locks.ZygoteUIDBase
	ZygoteBlocks  = locks.ZygoteBlocks
	// MaxZygoteChildren is the most children one zygote can have alive.
	MaxZygoteChildren = locks.MaxZygoteChildren
)

// NewID returns a fresh id for a run, a session or a sandbox: 16 lowercase
// hex digits from crypto/rand (which never fails since Go 1.24). It is
// nsbox's one id generator; a valid Spec.ID is what it returns, optionally
// with a prefix ("zy-", "sp-", "pool-").
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
