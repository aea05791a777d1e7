package daemon

import (
	"errors"
	"fmt"

	"github.com/nsbox/nsbox/cgroup"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/admission"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/volume"
	"github.com/nsbox/nsbox/rootfs"
)

// The core's own errors, each of a class (package errdefs).
var (
	// ErrShuttingDown: the daemon is draining and starts no new runs (the
	// admission Gate's error once drained).
	ErrShuttingDown = admission.ErrShuttingDown
	// ErrBusy: every run slot and queue place is taken (a BusyError).
	ErrBusy = admission.ErrBusy
	// ErrRootfsNotFound: the named root filesystem is not in the store.
	ErrRootfsNotFound = errdefs.New(errdefs.ErrInvalidArgument, "rootfs not found; list them with GET /v1/info or build one with `nsbox rootfs build`")
	// ErrNoNetwork: a run asks for network where no egress proxy runs.
	ErrNoNetwork = errdefs.New(errdefs.ErrInvalidArgument, "network: this nsbox has no egress proxy (in-process `nsbox exec --no-daemon` has none); run through a daemon with a [network] config")
)

// classify gives the engine's, the sessions', the runners' and the
// volume store's and the process agent's errors their class. It is the
// one place in the daemon that knows those packages' sentinels (E2B's
// envd, which uses the agent directly, classes the agent's in
// agentapi/e2b/envd; a terminal's calls, made by the server, in
// daemon/terminal).
func classify(err error) error {
	var class error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, session.ErrNotFound), errors.Is(err, container.ErrNotExist), errors.Is(err, volume.ErrNotFound):
		class = errdefs.ErrNotFound
	case errors.Is(err, session.ErrTooMany):
		class = errdefs.ErrExhausted
	case errors.Is(err, session.ErrDead):
		class = errdefs.ErrSessionDead
	case errors.Is(err, session.ErrBusy):
		class = errdefs.ErrSessionBusy
	case errors.Is(err, session.ErrClosed):
		return fmt.Errorf("%w: %w", err, ErrShuttingDown)
	case errors.Is(err, container.ErrInvalidSpec), errors.Is(err, container.ErrInvalidPath),
		errors.Is(err, container.ErrNotRegular), errors.Is(err, rootfs.ErrNotFound),
		errors.Is(err, volume.ErrInvalid):
		class = errdefs.ErrInvalidArgument
	case errors.Is(err, session.ErrNoProcesses):
		// A session made without processes: the request, not the
		// session's state, is what to change.
		class = errdefs.ErrInvalidArgument
	case errors.Is(err, container.ErrTooLarge):
		class = errdefs.ErrTooLarge
	case errors.Is(err, container.ErrFull), errors.Is(err, volume.ErrNoSpace):
		class = errdefs.ErrNoSpace
	case errors.Is(err, container.ErrExist), errors.Is(err, volume.ErrExists):
		class = errdefs.ErrExists
	case errors.Is(err, procs.ErrStart), errors.Is(err, procs.ErrNotPty):
		class = errdefs.ErrInvalidArgument
	case errors.Is(err, procs.ErrNotFound):
		class = errdefs.ErrNotFound
	case errors.Is(err, procs.ErrClosed): // the agent went with its sandbox
		class = errdefs.ErrSessionDead
	case errors.Is(err, volume.ErrInUse):
		class = errdefs.ErrInUse
	case errors.Is(err, volume.ErrNoTools):
		class = errdefs.ErrUnavailable
	case errors.Is(err, cgroup.ErrFreezeTimeout):
		// Its processes kept starting, or the machine is loaded: thawed, it runs on.
		return errdefs.In(errdefs.ErrUnavailable, fmt.Errorf("%w: the session was left running; pause it again", err))
	case errors.Is(err, session.ErrNotPython):
		class = errdefs.ErrInvalidArgument
	case errors.Is(err, runner.ErrStateTooLarge):
		class = errdefs.ErrTooLarge
	case errors.Is(err, runner.ErrStateBusy):
		// The kernel would not seal the state for now; the session is
		// unharmed and the same call will succeed: retry.
		class = errdefs.ErrUnavailable
	case errors.Is(err, runner.ErrState):
		// The session's own state refused to be carried: its pickling
		// (user code, __reduce__) raised or outlived the exec timeout.
		// The session it came from lives on; the same call fails again
		// until the state or the timeout changes, as a bad argument does.
		class = errdefs.ErrInvalidArgument
	case errors.Is(err, container.ErrBadCommand):
		// The kernel refused the command the request named (Run says
		// which field): the request is what to change.
		class = errdefs.ErrInvalidArgument
	case errors.Is(err, container.ErrNotDir), errors.Is(err, session.ErrLifetime):
		class = errdefs.ErrInvalidArgument
	default:
		return err
	}
	return errdefs.In(class, err)
}

// BusyError is ErrBusy with a hint of when to retry.
type BusyError = admission.BusyError
