// Package caller is who makes a request of the core, carried in its
// context: the transport puts it there (the HTTP server: the peer
// credentials of the Unix socket connection), and the core reads it to
// give a session or volume its owner, to decide who may see and use one,
// and to name the caller in its logs. A request with no Caller (an
// in-process caller of the core) is trusted.
package caller

import (
	"context"
	"slices"
)

// Caller is who makes a request, as the transport knows it. A session
// belongs to the uid that created it: other callers get not-found for it
// and do not see it listed, except admins (root, or a member of the
// policy's admin group, [sessions] admin_group).
type Caller struct {
	UID    uint32
	Groups []uint32 // primary and supplementary
}

type key struct{}

// With returns ctx carrying c.
func With(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, key{}, c)
}

// Owner is the owner a session or volume created by ctx's caller gets
// (-1: none, for an in-process caller).
func Owner(ctx context.Context) int64 {
	if c, ok := ctx.Value(key{}).(Caller); ok {
		return int64(c.UID)
	}
	return -1
}

// MayUse reports whether ctx's caller may see and use what owner owns:
// it is unowned, the caller owns it, or the caller is root, in-process,
// or a member of adminGID (nil: no admin group).
func MayUse(ctx context.Context, owner int64, adminGID *uint32) bool {
	c, ok := ctx.Value(key{}).(Caller)
	if !ok || owner < 0 || int64(c.UID) == owner || c.UID == 0 {
		return true
	}
	return adminGID != nil && slices.Contains(c.Groups, *adminGID)
}

// Attrs are log attributes naming ctx's caller, if any.
func Attrs(ctx context.Context) []any {
	if c, ok := ctx.Value(key{}).(Caller); ok {
		return []any{"uid", c.UID}
	}
	return nil
}
