package procs

import (
	"context"
	"fmt"
)

// Resize sets the window size of a process's terminal (Config.Pty): the
// agent's TIOCSWINSZ on its master, and the kernel's SIGWINCH to the
// terminal's foreground group. ErrNotPty for a process without one.
func (a *Agent) Resize(ctx context.Context, sel Selector, size Size) error {
	if size.Rows == 0 || size.Cols == 0 {
		return fmt.Errorf("%s: %w: a size of %dx%d", sel, ErrNotPty, size.Cols, size.Rows)
	}
	return a.op(ctx, sel, request{Op: "resize", Pty: &size})
}
