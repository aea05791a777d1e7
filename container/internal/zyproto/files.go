package zyproto

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/cleanup"
)

// ChildFiles are a child's run socket (fd 3 of its command) and stdio
// pipes: the engine's ends, and the child's, which go to the zygote with
// the fork request.
type ChildFiles struct {
	Run    *os.File // non-blocking, with SO_PASSCRED (Handshake)
	Stdin  *os.File // write end
	Stdout *os.File // read end
	Stderr *os.File // read end
	theirs [4]*os.File
}

// NewChildFiles makes a child's socket and pipes.
func NewChildFiles() (*ChildFiles, error) {
	f := &ChildFiles{}
	cu := cleanup.Make(f.Close)
	defer cu.Clean()
	// Our end is non-blocking (deadlines for the handshake); the child's
	// is a plain blocking socket.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("run socket: %w", err)
	}
	f.Run, f.theirs[0] = os.NewFile(uintptr(fds[0]), "run"), os.NewFile(uintptr(fds[1]), "run-child")
	if err := unix.SetNonblock(fds[1], false); err != nil {
		return nil, err
	}
	// The kernel attaches the sender's host pid to what the child writes.
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return nil, fmt.Errorf("run socket: %w", err)
	}
	if f.theirs[1], f.Stdin, err = os.Pipe(); err != nil {
		return nil, err
	}
	if f.Stdout, f.theirs[2], err = os.Pipe(); err != nil {
		return nil, err
	}
	if f.Stderr, f.theirs[3], err = os.Pipe(); err != nil {
		return nil, err
	}
	cu.Release()
	return f, nil
}

// Theirs are the child's ends, in the order the zygote expects them.
func (f *ChildFiles) Theirs() []*os.File { return f.theirs[:] }

// CloseTheirs closes the child's ends (once the zygote has them, or the
// fork failed).
func (f *ChildFiles) CloseTheirs() {
	for i, t := range f.theirs {
		if t != nil {
			t.Close()
			f.theirs[i] = nil
		}
	}
}

// Close closes every end still open; an end set to nil was handed over.
func (f *ChildFiles) Close() {
	f.CloseTheirs()
	for _, o := range []*os.File{f.Run, f.Stdin, f.Stdout, f.Stderr} {
		if o != nil {
			o.Close()
		}
	}
}
