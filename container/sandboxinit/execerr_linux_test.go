package sandboxinit

import (
	"errors"
	"syscall"
	"testing"
)

// TestExecErrorReport: an exec failure crosses the error pipe with its
// errno and path intact (a path with spaces, or one that reads like a
// report, included), and nothing else reads as one.
func TestExecErrorReport(t *testing.T) {
	for _, path := range []string{"/etc/passwd", "./x", "/a b/c d", "exec-failed 13 /x", ""} {
		msg := message(execFailed(path, syscall.EACCES))
		got := ParseExecError(msg)
		if got == nil || got.Path != path || got.Errno != syscall.EACCES {
			t.Errorf("%q: report %q parsed as %+v", path, msg, got)
			continue
		}
		if !errors.Is(got, syscall.EACCES) {
			t.Errorf("%v is not EACCES", got)
		}
	}
	for _, msg := range []string{"", "mount /proc: permission denied", "x: command not found in PATH /bin",
		"exec-failed ", "exec-failed x /a", "exec-failed -1 /a", "exec-failed 13"} {
		if got := ParseExecError(msg); got != nil {
			t.Errorf("%q parsed as an exec failure: %+v", msg, got)
		}
	}
	if got := message(execFailed("/x", errors.New("odd"))); ParseExecError(got) != nil {
		t.Errorf("an exec error without an errno reported as one: %q", got)
	}
}
