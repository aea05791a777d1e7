package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container"
)

// MaxStateBytes caps a snapshot of a runner's state whatever the caller
// asks (a session's memory limit usually caps it lower).
const MaxStateBytes = 512 << 20

// NotCarried is a name a snapshot left behind (it could not be pickled:
// an open file, a socket, a thread, a generator, a live figure) or a
// restore could not load, with the reason.
type NotCarried struct {
	Name    string `json:"name"`
	Context string `json:"context,omitempty"` // "" is the default context
	Reason  string `json:"reason"`
}

// State is the user state of a Python runner's contexts, serialized by
// the runner (Snapshot): an opaque blob, held in a sealed memfd that no
// one can change once written. Only a runner loads it (Restore); the host
// never unpickles it. Close frees it.
type State struct {
	f          *os.File
	size       int64
	NotCarried []NotCarried
}

// Size is the blob's length in bytes.
func (s *State) Size() int64 { return s.size }

// WriteTo copies the blob to w (a park file).
func (s *State) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, io.NewSectionReader(s.f, 0, s.size))
}

// Close frees the blob.
func (s *State) Close() error { return s.f.Close() }

// ReadState reads a blob of size bytes written by State.WriteTo (a parked
// session's) into a new State, refusing one over maxBytes.
func ReadState(r io.Reader, size, maxBytes int64, notCarried []NotCarried) (*State, error) {
	if maxBytes <= 0 || maxBytes > MaxStateBytes {
		maxBytes = MaxStateBytes
	}
	if size <= 0 || size > maxBytes {
		return nil, fmt.Errorf("%w: %w: a state of %d bytes (the cap is %d)", ErrState, ErrStateTooLarge, size, maxBytes)
	}
	f, err := newMemfd()
	if err != nil {
		return nil, err
	}
	if n, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: read %d of %d bytes: %v", ErrState, n, size, err)
	}
	if err := seal(f); err != nil {
		f.Close()
		return nil, err
	}
	return &State{f: f, size: size, NotCarried: notCarried}, nil
}

func newMemfd() (*os.File, error) {
	fd, err := unix.MemfdCreate("nsbox-session-state", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), "nsbox-session-state"), nil
}

// seal makes the memfd immutable: the sandboxes it goes to can read it,
// never change what a sibling loads. It fails while a writable mapping of
// it exists.
func seal(f *os.File) error {
	return sealRetrying(func() error {
		_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
		return err
	}, time.Sleep)
}

// sealAttempts and sealBackoff bound the retry of a seal the kernel
// refuses with EBUSY: F_SEAL_WRITE waits (memfd_wait_for_pins, 150 ms
// here) for every page of the memfd to lose its extra references, and a
// page that something holds a moment longer (reclaim or compaction
// isolating it, a page-cache lookup) fails the seal though nothing will
// write to it: 1 in 1,000 forks on a loaded machine. The seal adds
// nothing when it fails, so it is tried again: waits of 20, 40, 80 and
// 160 ms, about 1 s in all with the kernel's own.
const (
	sealAttempts = 5
	sealBackoff  = 20 * time.Millisecond
)

// sealRetrying calls add until it succeeds, fails with an error other
// than EBUSY, or has failed sealAttempts times, waiting (wait) between
// tries. A seal still busy at the end is ErrStateBusy, which names the
// last error.
func sealRetrying(add func() error, wait func(time.Duration)) error {
	var err error
	for i := range sealAttempts {
		if i > 0 {
			wait(sealBackoff << (i - 1))
		}
		if err = add(); err == nil {
			return nil
		} else if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w: seal the state: %v", ErrState, err)
		}
	}
	return fmt.Errorf("%w: %w: seal the state: %d tries, the last: %v", ErrState, ErrStateBusy, sealAttempts, err)
}

// Snapshot serializes the user variables of every context of a Python
// runner: each name on its own with cloudpickle when the rootfs has it
// (functions, classes and lambdas defined in cells come along), else with
// the stdlib's pickle; modules by name. A name that cannot be carried is
// listed in State.NotCarried, never dropped silently. A state over
// maxBytes (0 or more than MaxStateBytes: MaxStateBytes) fails with
// ErrState. Pickling runs user code (__reduce__): past timeout (0: none)
// it is interrupted, and killed InterruptGrace later with the sandbox.
// It waits for a running cell, like Exec.
func (r *Runner) Snapshot(ctx context.Context, maxBytes int64, timeout time.Duration) (*State, error) {
	if !r.lang.Snapshots() {
		return nil, fmt.Errorf("snapshot: fork and park are for Python sessions: %w", ErrUnsupported)
	}
	if maxBytes <= 0 || maxBytes > MaxStateBytes {
		maxBytes = MaxStateBytes
	}
	f, err := newMemfd()
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	rep, err := r.controlFor(ctx, stateRequest{Snapshot: true, MaxBytes: maxBytes}, []*os.File{f}, timeout)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if rep.OverCap {
		return nil, fmt.Errorf("%w: %w: %s", ErrState, ErrStateTooLarge, rep.Error)
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrState, rep.Error)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if st.Size() != rep.SnapshotBytes || st.Size() > maxBytes {
		return nil, fmt.Errorf("%w: the runner wrote %d bytes and said %d (cap %d)", ErrState, st.Size(), rep.SnapshotBytes, maxBytes)
	}
	if err := seal(f); err != nil {
		return nil, err
	}
	ok = true
	return &State{f: f, size: st.Size(), NotCarried: rep.NotCarried}, nil
}

// Restore loads st into the runner's contexts, before its first cell:
// names, execution counts and contexts as the snapshot had them; random
// (and numpy's global generator, when imported) reseeded from the kernel
// so that branches differ. Names that fail to load are returned. st stays
// the caller's (one State restores into many runners).
func (r *Runner) Restore(ctx context.Context, st *State, timeout time.Duration) ([]NotCarried, error) {
	if !r.lang.Snapshots() {
		return nil, fmt.Errorf("restore: fork and park are for Python sessions: %w", ErrUnsupported)
	}
	rep, err := r.controlFor(ctx, stateRequest{Restore: true}, []*os.File{st.f}, timeout)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrState, rep.Error)
	}
	return rep.NotCarried, nil
}

// errInterrupted: a state request outlived its timeout and was
// interrupted in time.
var errInterrupted = errors.New("interrupted: it outlived its timeout")

// awaitTimed waits for the answer to a request already sent; past
// timeout it interrupts the runner (SIGINT) and InterruptGrace later
// kills the sandbox.
func (r *Runner) awaitTimed(timeout time.Duration) (*reply, error) {
	var tc, grace <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	interrupted := false
	for {
		select {
		case rep, ok := <-r.replies:
			if !ok {
				r.died()
				return nil, fmt.Errorf("%w: %v", ErrDead, r.readErr)
			}
			if interrupted {
				return nil, fmt.Errorf("%w: %w after %v (%s)", ErrState, errInterrupted, timeout, rep.Error)
			}
			return rep, nil
		case <-r.sb.Done():
			r.died()
			_, why := r.Dead()
			return nil, fmt.Errorf("%w: %s", ErrDead, why)
		case <-tc:
			interrupted = true
			_ = r.sb.Signal(syscall.SIGINT)
			grace = time.After(InterruptGrace)
		case <-grace:
			r.setDead(StatusTimeout, "a snapshot or restore did not stop after its KeyboardInterrupt; the sandbox was killed")
			r.sb.Kill(container.StatusTimeout)
			<-r.sb.Done()
			return nil, fmt.Errorf("%w: %s", ErrDead, "a snapshot or restore did not stop after its KeyboardInterrupt")
		}
	}
}
