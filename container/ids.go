package container

import "github.com/nsbox/nsbox/container/internal/locks"

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
