package runner

import (
	"bytes"
	"sync"
)

// sink is the io.Writer the sandbox's stdout (or stderr) is fed to for its
// whole life. While a cell runs it forwards the cell's bytes to the cell's
// callback and keeps a capped copy; it cuts the stream at the cell's marker,
// which it never passes on. Between cells output is dropped.
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
}

// begin starts a cell: output up to marker goes to on (may be nil) and to
// a copy capped at limit bytes.
func (s *sink) begin(marker []byte, limit int64, on func([]byte)) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active, s.marker, s.pending, s.on = true, marker, nil, on
	s.buf, s.limit, s.total = nil, limit, 0
	s.seen = make(chan struct{})
	return s.seen
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
	return s.buf, s.total, s.total > int64(len(s.buf))
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active {
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

func (s *sink) emitLocked(b []byte) {
	if len(b) == 0 {
		return
	}
	s.total += int64(len(b))
	if room := s.limit - int64(len(s.buf)); room > 0 {
		s.buf = append(s.buf, b[:min(int64(len(b)), room)]...)
	}
	if s.on != nil {
		s.on(b)
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
