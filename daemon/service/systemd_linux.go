package service

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
)

// daemonListener returns the socket systemd passed (socket activation,
// LISTEN_FDS/LISTEN_PID), or else listens on path itself. Either way it
// takes path's lock, so a second daemon started by hand refuses to run.
// activated says which it was.
func daemonListener(path string) (ln net.Listener, lock *socketLock, activated bool, err error) {
	ln, err = activatedListener()
	if err != nil {
		return nil, nil, false, err
	}
	if ln == nil {
		ln, lock, err = listenSocket(path)
		return ln, lock, false, err
	}
	// systemd owns the socket file: lock it, never replace it.
	if addr := ln.Addr().String(); strings.HasPrefix(addr, "/") {
		if lock, err = lockSocket(addr); err != nil {
			ln.Close()
			return nil, nil, false, err
		}
	}
	return ln, lock, true, nil
}

// activatedListener returns the one Unix stream socket systemd passed, nil
// when it passed none, and an error for anything else. The LISTEN_*
// variables are removed from the environment and the fd is close-on-exec,
// so no sandbox inherits them.
func activatedListener() (net.Listener, error) {
	lns, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	if len(lns) == 0 {
		return nil, nil
	}
	closeAll := func() {
		for _, l := range lns {
			if l != nil {
				l.Close()
			}
		}
	}
	if len(lns) != 1 || lns[0] == nil {
		closeAll()
		return nil, errors.New("socket activation: want exactly one listening Unix stream socket (ListenStream=/run/nsbox/nsbox.sock in nsbox.socket)")
	}
	if _, ok := lns[0].(*net.UnixListener); !ok {
		closeAll()
		return nil, fmt.Errorf("socket activation: got a %s socket; nsbox serves a Unix stream socket only (ListenStream=/run/nsbox/nsbox.sock)", lns[0].Addr().Network())
	}
	return lns[0], nil
}

// sdNotify sends state to systemd when NOTIFY_SOCKET is set (Type=notify);
// elsewhere it does nothing.
func sdNotify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify", "state", strings.ReplaceAll(state, "\n", " "), "err", err)
	}
}
