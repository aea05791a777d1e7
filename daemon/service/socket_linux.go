package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// socketLock is held for the daemon's lifetime, so two daemons never serve
// (or replace) the same socket.
type socketLock struct{ f *os.File }

func (l *socketLock) Close() error { return l.f.Close() }

// listenSocket takes the socket's lock, refuses when another daemon answers
// on path, replaces a stale socket file, and listens with mode 0660, owner
// root and group nsbox when that group exists.
func listenSocket(path string) (net.Listener, *socketLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("socket directory: %w", err)
	}
	lock, err := lockSocket(path)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (net.Listener, *socketLock, error) { lock.Close(); return nil, nil, err }

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	if c, err := d.DialContext(ctx, "unix", path); err == nil {
		c.Close()
		return fail(fmt.Errorf("another nsbox daemon is serving %s; stop it first", path))
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return fail(fmt.Errorf("%s exists and is not a socket; remove it or choose another --socket", path))
		}
		if err := os.Remove(path); err != nil {
			return fail(fmt.Errorf("removing stale socket: %w", err))
		}
	}

	old := unix.Umask(0o117) // the socket is born 0660: no window with wider access
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return fail(err)
	}
	if g, err := user.LookupGroup("nsbox"); err == nil {
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(path, 0, gid); err != nil {
			ln.Close()
			return fail(fmt.Errorf("giving the socket to group nsbox: %w", err))
		}
	} else if !errors.As(err, new(user.UnknownGroupError)) {
		ln.Close()
		return fail(fmt.Errorf("looking up group nsbox: %w", err))
	}
	return ln, lock, nil
}

// lockSocket takes path's lock file (path.lock) without blocking.
func lockSocket(path string) (*socketLock, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("socket lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another nsbox daemon is serving %s (it holds %s.lock); stop it first", path, path)
	}
	return &socketLock{f: f}, nil
}

// searchable adds search (x) permission for group and others to dir, so
// that the socket inside it is reached by whoever its own mode lets in
// (root and the nsbox group); listing stays as it was. It reports whether
// it changed the mode.
func searchable(dir string) (bool, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	mode := fi.Mode().Perm()
	if mode&0o011 == 0o011 {
		return false, nil
	}
	return true, os.Chmod(dir, mode|0o011)
}
