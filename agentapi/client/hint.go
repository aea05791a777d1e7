package client

import (
	"errors"
	"syscall"
)

// dialHint says, for a request that never reached the daemon, what to do
// about it: the cause behind "connect: …", in the user's terms.
func dialHint(err error) string {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return " (permission denied: the socket is for root and the nsbox group: `sudo usermod -aG nsbox $USER`," +
			" then log in again; `nsbox doctor` checks the socket and its directory)"
	case errors.Is(err, syscall.ENOENT):
		return " (no socket there: start the daemon, `sudo systemctl start nsbox` or `sudo nsbox daemon`, or pass --socket)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return " (nothing listens on it: the daemon that made it is gone; start it again)"
	}
	return " (is `nsbox daemon` running?)"
}
