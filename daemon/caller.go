package daemon

import (
	"context"

	"github.com/nsbox/nsbox/daemon/caller"
)

// Caller is who makes a request, as the transport knows it (package
// caller): a session belongs to the uid that created it.
type Caller = caller.Caller

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context { return caller.With(ctx, c) }

// owner is the owner a session created by ctx's caller gets (-1: none).
func owner(ctx context.Context) int64 { return caller.Owner(ctx) }

// mayUse reports whether ctx's caller may see and use a session of owner,
// under the policy's admin group.
func (d *Daemon) mayUse(ctx context.Context, owner int64) bool {
	return caller.MayUse(ctx, owner, d.pol.Load().Sessions.AdminGID)
}

// callerAttrs are log attributes naming ctx's caller, if any.
func callerAttrs(ctx context.Context) []any { return caller.Attrs(ctx) }
