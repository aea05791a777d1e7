package daemon

import (
	"context"
	"slices"
)

// Caller is who makes a request, as the transport knows it (the HTTP
// server: the peer credentials of the Unix socket connection). A session
// belongs to the uid that created it: other callers get not-found for it
// and do not see it listed, except admins (root, or a member of the
// policy's admin group, [sessions] admin_group). A request with no Caller
// (an in-process caller of the core) is trusted.
type Caller struct {
	UID    uint32
	Groups []uint32 // primary and supplementary
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// owner is the owner a session created by ctx's caller gets (-1: none).
func owner(ctx context.Context) int64 {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return int64(c.UID)
	}
	return -1
}

// mayUse reports whether ctx's caller may see and use a session of owner.
func (d *Daemon) mayUse(ctx context.Context, owner int64) bool {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok || owner < 0 || int64(c.UID) == owner || c.UID == 0 {
		return true
	}
	admin := d.pol.Load().Sessions.AdminGID
	return admin != nil && slices.Contains(c.Groups, *admin)
}

// callerAttrs are log attributes naming ctx's caller, if any.
func callerAttrs(ctx context.Context) []any {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return []any{"uid", c.UID}
	}
	return nil
}
