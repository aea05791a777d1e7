package runner

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/frame"
)

// DropContext makes the runner forget the named context id: its next cell
// starts in a fresh namespace at execution count 1. Dropping a context
// that does not exist is no error; dropping "" empties the default
// namespace. It waits for a running cell to end (ctx bounds that wait).
func (r *Runner) DropContext(ctx context.Context, id string) error {
	_, err := r.control(ctx, dropRequest{Drop: id}, nil)
	return err
}

// control sends a request that is not a cell (with files attached, when
// any) and returns the runner's answer. It is serialised with cells; ctx
// bounds the wait for a running cell, not the answer, which the runner
// gives at once (a reply left unread would be taken for the next cell's).
func (r *Runner) control(ctx context.Context, req any, files []*os.File) (*reply, error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.sem }()
	if st, why := r.Dead(); st != "" {
		return nil, fmt.Errorf("%w: %s", ErrDead, why)
	}
	b, err := frame.Append(nil, req)
	if err != nil {
		return nil, err
	}
	if err := sendFiles(r.ctl, b, files); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDead, err)
	}
	select {
	case rep, ok := <-r.replies:
		if !ok {
			r.died()
			return nil, fmt.Errorf("%w: %v", ErrDead, r.readErr)
		}
		return rep, nil
	case <-r.sb.Done():
		r.died()
		_, why := r.Dead()
		return nil, fmt.Errorf("%w: %s", ErrDead, why)
	}
}

// sendFiles writes all of b to the control socket, with files attached to
// its first bytes (SCM_RIGHTS). It goes through the socket's raw conn:
// Fd() would turn a zygote child's non-blocking socket blocking under the
// reader.
func sendFiles(sock *os.File, b []byte, files []*os.File) error {
	if len(files) == 0 {
		_, err := sock.Write(b)
		return err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var n int
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		n, serr = unix.SendmsgN(int(fd), b, unix.UnixRights(fds...), nil, 0)
		return serr != unix.EAGAIN
	})
	runtime.KeepAlive(files)
	if err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	_, err = sock.Write(b[n:])
	return err
}
