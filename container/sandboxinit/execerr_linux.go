package sandboxinit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ExecError is the kernel's refusal of the command itself: execve failed
// on argv[0] after the sandbox was built. The init reports it on the
// error pipe in a form of its own (report), so that the engine can tell
// it from a set-up failure by its errno rather than by its wording.
type ExecError struct {
	Path  string // argv[0] as the run gave it
	Errno syscall.Errno
}

func (e *ExecError) Error() string { return fmt.Sprintf("exec %s: %v", e.Path, e.Errno) }

// Unwrap makes errors.Is(err, unix.EACCES) and the like work.
func (e *ExecError) Unwrap() error { return e.Errno }

// execTag starts an exec failure's report on the error pipe: the tag, the
// errno in decimal, a space, the path.
const execTag = "exec-failed "

func (e *ExecError) report() string {
	return execTag + strconv.Itoa(int(e.Errno)) + " " + e.Path
}

// ParseExecError returns the exec failure an init's message on the error
// pipe reports, or nil when it reports something else (or nothing).
func ParseExecError(msg string) *ExecError {
	rest, ok := strings.CutPrefix(msg, execTag)
	if !ok {
		return nil
	}
	num, path, ok := strings.Cut(rest, " ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n <= 0 {
		return nil
	}
	return &ExecError{Path: path, Errno: syscall.Errno(n)}
}

// execFailed is what runInit returns when execve itself failed.
func execFailed(path string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &ExecError{Path: path, Errno: errno}
	}
	return fmt.Errorf("exec %s: %w", path, err)
}

// message is what the init writes on the error pipe for err.
func message(err error) string {
	var ee *ExecError
	if errors.As(err, &ee) {
		return ee.report()
	}
	return err.Error()
}
