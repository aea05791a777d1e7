// Package output holds the writers a sandbox's output goes into: Capture
// keeps a capped copy of a command's stream (and forwards it live), Log
// logs a zygote's own output and keeps its tail for error messages.
package output

import (
	"io"
	"sync"
)

// Capture keeps the first limit bytes of a stream, counts the rest, and
// forwards what it keeps to an optional live writer. Past the limit it calls
// onOverflow once (the engine kills the sandbox then). With stream set it
// only forwards: it keeps nothing and has no limit.
type Capture struct {
	mu         sync.Mutex
	buf        []byte
	limit      int64
	total      int64
	live       io.Writer
	onOverflow func()
	overflowed bool
	stream     bool
}

// NewCapture returns a Capture (see the type).
func NewCapture(limit int64, live io.Writer, stream bool, onOverflow func()) *Capture {
	return &Capture{limit: limit, live: live, stream: stream, onOverflow: onOverflow}
}

func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if c.stream {
		if c.live != nil {
			_, _ = c.live.Write(p)
		}
		return n, nil
	}
	room := c.limit - int64(len(c.buf))
	keep := p
	if int64(len(keep)) > room {
		keep = keep[:max(room, 0)]
	}
	c.buf = append(c.buf, keep...)
	if c.live != nil && len(keep) > 0 {
		// A slow or failed live consumer must not stall or fail the run.
		_, _ = c.live.Write(keep)
	}
	if c.total > c.limit && !c.overflowed {
		c.overflowed = true
		if c.onOverflow != nil {
			c.onOverflow()
		}
	}
	return n, nil
}

// Result is what was kept, the total written and whether some was cut.
func (c *Capture) Result() (data []byte, total int64, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf, c.total, c.total > int64(len(c.buf))
}
