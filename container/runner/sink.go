package runner

import (
	"bytes"
	"sync"
)

// sink is the io.Writer the sandbox's stdout (or stderr) is fed to for its
// whole life. While a cell runs it forwards the cell's bytes, up to the
// cell's cap, to the cell's callback and keeps a copy of them; it cuts the
// stream at the cell's marker, which it never passes on. Between cells
// output is dropped. What a cell passes on and everything written between
// cells count towards the runner's lifetime cap (bytes past a cell's own cap
// do not: that cell is being stopped anyway).
type sink struct {
	mu      sync.Mutex
	active  bool
	marker  []byte
	pending []byte // a tail that may be the start of the marker
	on      func([]byte)
	buf     []byte
	limit   int64
	total   int64
	seen    chan struct{} // closed when the marker went by
	over    chan struct{} // closed when the cell's output passed limit

	life, lifeLimit int64  // bytes over the runner's life; its cap (0: none)
	onLife          func() // called once, when life passes lifeLimit
}

// begin starts a cell: output up to marker goes, up to limit bytes, to on
// (may be nil) and to a copy. The first channel is closed when the marker
// went by, the second when the cell's output passed limit.
func (s *sink) begin(marker []byte, limit int64, on func([]byte)) (seen, over <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active, s.marker, s.pending, s.on = true, marker, nil, on
	s.buf, s.limit, s.total = nil, limit, 0
	s.seen, s.over = make(chan struct{}), make(chan struct{})
	return s.seen, s.over
}

// end stops the cell and returns its captured output, the count of bytes
// produced and whether the copy was cut. A held-back tail is flushed when
// the marker never came.
func (s *sink) end() (data []byte, total int64, truncated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active {
		s.emitLocked(s.pending)
		s.active, s.pending = false, nil
	}
	s.on = nil
	// The copy is handed over, not kept: a runner torn down after its
	// answer must not hold a 64 MiB output alive until it is gone.
	data = s.buf
	s.buf = nil
	return data, s.total, s.total > int64(len(data))
}

// limitLife caps the bytes written over the sink's life, from now on:
// past n, onPast is called once.
func (s *sink) limitLife(n int64, onPast func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.life, s.lifeLimit, s.onLife = 0, n, onPast
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active {
		s.grow(len(p))
		return len(p), nil
	}
	data := p
	if len(s.pending) > 0 {
		data = append(s.pending, p...)
		s.pending = nil
	}
	if i := bytes.Index(data, s.marker); i >= 0 {
		s.emitLocked(data[:i])
		s.active = false
		close(s.seen)
		return len(p), nil
	}
	keep := partialSuffix(data, s.marker)
	s.emitLocked(data[:len(data)-keep])
	if keep > 0 {
		s.pending = append([]byte(nil), data[len(data)-keep:]...)
	}
	return len(p), nil
}

// emitLocked passes b on, as far as the cell's cap leaves room: nothing
// past the cap reaches the callback (a flood must not reach the client).
func (s *sink) emitLocked(b []byte) {
	if len(b) == 0 {
		return
	}
	room := max(s.limit-int64(len(s.buf)), 0)
	keep := b[:min(int64(len(b)), room)]
	wasOver := s.total > s.limit
	s.total += int64(len(b))
	s.buf = append(s.buf, keep...)
	s.grow(len(keep))
	if s.on != nil && len(keep) > 0 {
		s.on(keep)
	}
	if !wasOver && s.total > s.limit {
		close(s.over)
	}
}

// grow counts n bytes towards the lifetime cap.
func (s *sink) grow(n int) {
	s.life += int64(n)
	if s.lifeLimit > 0 && s.life > s.lifeLimit && s.onLife != nil {
		f := s.onLife
		s.onLife = nil
		f()
	}
}

// partialSuffix returns the length of the longest suffix of data that is a
// proper prefix of marker.
func partialSuffix(data, marker []byte) int {
	for n := min(len(data), len(marker)-1); n > 0; n-- {
		if bytes.HasSuffix(data, marker[:n]) {
			return n
		}
	}
	return 0
}
