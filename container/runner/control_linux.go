package runner

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/frame"
	"github.com/nsbox/nsbox/container/procs"
)

// StartAgent forks the sandbox's process agent from the runner and
// returns the host's end of it (package procs). The agent serves over a
// socketpair made here, whose other end goes to the runner over the
// control socket: it listens on nothing in the sandbox. It waits for a
// running cell to end, like Exec; the agent's processes run alongside
// later cells. The agent ends with the sandbox, or at Agent.Close.
func (r *Runner) StartAgent(ctx context.Context) (*procs.Agent, error) {
	if r.lang == JavaScript {
		// The agent is Python, started by runner.py; runner.js answers an
		// agent request with this error too.
		return nil, fmt.Errorf("start process agent: processes are not supported in a Node session yet: %w", ErrUnsupported)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("process agent socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "agent"), os.NewFile(uintptr(fds[1]), "agent-sandbox")
	rep, err := r.control(ctx, agentRequest{Agent: true, Source: procs.AgentSource}, []*os.File{theirs})
	theirs.Close()
	if err == nil && (rep.Error != "" || rep.AgentPid == 0) {
		err = fmt.Errorf("%w: the runner did not start the process agent: %s", ErrProtocol, rep.Error)
	}
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("start process agent: %w", err)
	}
	return procs.New(ours, rep.AgentPid)
}

// DropContext makes the runner forget the named context id: its next cell
// starts in a fresh namespace at execution count 1. Dropping a context
// that does not exist is no error; dropping "" empties the default
// namespace. It waits for a running cell to end (ctx bounds that wait).
func (r *Runner) DropContext(ctx context.Context, id string) error {
	_, err := r.control(ctx, dropRequest{Drop: id}, nil)
	return err
}

// SetHome makes dir the runner's working directory and $HOME, and those of
// what it starts later: the process agent (start it after), and the
// children of cells. A dir that is not a directory in the sandbox is no
// error and changes nothing (a rootfs without /home: the workspace
// stays); the directory in effect is returned.
func (r *Runner) SetHome(ctx context.Context, dir string) (string, error) {
	rep, err := r.control(ctx, homeRequest{Home: dir}, nil)
	if err != nil {
		return "", fmt.Errorf("set home %s: %w", dir, err)
	}
	if rep.Error != "" {
		return "", fmt.Errorf("%w: set home %s: %s", ErrProtocol, dir, rep.Error)
	}
	return rep.Home, nil
}

// control sends a request that is not a cell (with files attached, when
// any) and returns the runner's answer. It is serialised with cells; ctx
// bounds the wait for a running cell, not the answer, which the runner
// gives at once (a reply left unread would be taken for the next cell's).
func (r *Runner) control(ctx context.Context, req any, files []*os.File) (*reply, error) {
	return r.controlFor(ctx, req, files, 0)
}

// controlFor is control for a request that may run user code (a state
// snapshot or restore): past timeout (0: none) it is interrupted.
func (r *Runner) controlFor(ctx context.Context, req any, files []*os.File, timeout time.Duration) (*reply, error) {
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
	if _, err := r.ctl.Write(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDead, err)
	}
	// The files go with one byte of their own after the frame: the runner
	// reads frames with read(), which would drop them, and that byte with
	// recvmsg.
	if len(files) > 0 {
		if err := sendFiles(r.ctl, []byte{0}, files); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDead, err)
		}
	}
	return r.awaitTimed(timeout)
}

// sendFiles writes all of b to the control socket, with files attached to
// its first bytes (SCM_RIGHTS). It goes through the socket's raw conn:
// Fd() would turn a zygote child's non-blocking socket blocking under the
// reader.
func sendFiles(sock *os.File, b []byte, files []*os.File) error {
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
