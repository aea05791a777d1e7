package guest

import (
	"bytes"
	"encoding/json"

	"github.com/nsbox/nsbox/container/runner"
)

// maxReply bounds the reply line (a value is capped at 64 KiB by the
// runner; an exception's traceback is not).
const maxReply = 8 << 20

// reply is a guest's answer: the Node runner's (container/runner's
// protocol), or the bash driver's {"exit_code"}.
type reply struct {
	Ready     bool              `json:"ready"`
	Count     int               `json:"count"`
	Value     *string           `json:"value"`
	Exception *runner.Exception `json:"exception"`
	ExitCode  *int              `json:"exit_code"`
	Dropped   bool              `json:"dropped"`
	Error     string            `json:"error"`
}

// cell is one request's output as it arrives: each stream up to its
// marker, then (stdout) the reply line. The guest's mu is held.
type cell struct {
	marker    []byte
	cellMarks bool // stderr is marked too (a cell; not the ready line or a drop)

	pend    [2][]byte // bytes held back: they may begin the marker
	seen    [2]bool   // the stream's marker passed
	line    []byte    // the reply line so far
	rep     reply
	replied bool // the reply line is in
	bad     bool // the reply line was not JSON, or too long
	fired   bool // done is closed

	limit     int64
	on        [2]func([]byte)
	out       [2]bytes.Buffer
	n         [2]int64
	truncated [2]bool
	overOnce  bool
	done      chan struct{} // the reply and every expected marker came
	over      chan struct{} // a stream passed limit
}

// feed takes data of stream i (0 stdout, 1 stderr).
func (c *cell) feed(i int, b []byte) {
	if c.seen[i] {
		if i == 0 && !c.replied {
			c.reply(b)
		}
		return
	}
	p := append(c.pend[i], b...)
	if at := bytes.Index(p, c.marker); at >= 0 {
		c.emit(i, p[:at])
		rest := p[at+len(c.marker):]
		c.pend[i], c.seen[i] = nil, true
		if i == 0 {
			c.reply(rest)
		}
		c.fire()
		return
	}
	k := heldBack(p, c.marker)
	c.emit(i, p[:len(p)-k])
	c.pend[i] = append([]byte(nil), p[len(p)-k:]...)
}

// reply takes stdout after the marker, up to the reply line's end.
func (c *cell) reply(b []byte) {
	at := bytes.IndexByte(b, '\n')
	if at < 0 {
		if len(c.line)+len(b) > maxReply {
			c.bad, c.replied = true, true
			c.fire()
			return
		}
		c.line = append(c.line, b...)
		return
	}
	c.line = append(c.line, b[:at]...)
	if err := json.Unmarshal(c.line, &c.rep); err != nil {
		c.bad = true
	}
	c.line, c.replied = nil, true
	c.fire()
}

// fire closes done once the reply and every expected marker came.
func (c *cell) fire() {
	if !c.fired && c.replied && (!c.cellMarks || c.seen[1]) {
		c.fired = true
		close(c.done)
	}
}

// emit passes output on, up to the cell's cap per stream.
func (c *cell) emit(i int, b []byte) {
	if len(b) == 0 {
		return
	}
	c.n[i] += int64(len(b))
	keep := b
	if room := c.limit - int64(c.out[i].Len()); int64(len(b)) > room {
		keep = b[:max(room, 0)]
		c.truncated[i] = true
		if !c.overOnce {
			c.overOnce = true
			close(c.over)
		}
	}
	if len(keep) == 0 {
		return
	}
	c.out[i].Write(keep)
	if f := c.on[i]; f != nil {
		f(keep)
	}
}
