package egress

import (
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A splicer moves one direction of a tunnel inside the kernel, as
// TCPConn.ReadFrom does (socket -> pipe -> socket, splice(2)), but with
// its own pipe, so that each batch is counted between its two splices:
// the bytes past the byte cap reach the pipe and never leave it.
type splicer struct {
	src, dst syscall.RawConn
	r, w     int // the pipe's ends
	f        *flow
	sent     bool
}

// newSplicer makes a splicer from src to dst; false if either is not a
// socket or the pipe cannot be made.
func newSplicer(dst, src net.Conn, f *flow, sent bool) (*splicer, bool) {
	sc, ok := src.(syscall.Conn)
	dc, ok2 := dst.(syscall.Conn)
	if !ok || !ok2 {
		return nil, false
	}
	rs, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	rd, err := dc.SyscallConn()
	if err != nil {
		return nil, false
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, false
	}
	// Best effort: a pipe of spliceChunk moves a chunk per call, where
	// the default 64 KiB takes sixteen.
	unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, spliceChunk)
	return &splicer{src: rs, dst: rd, r: p[0], w: p[1], f: f, sent: sent}, true
}

func (s *splicer) Close() {
	unix.Close(s.r)
	unix.Close(s.w)
}

// copyN moves limit bytes (limit < 0: up to src's end), each batch
// counted with take before it leaves the pipe.
func (s *splicer) copyN(limit int64) (int64, error) {
	var total int64
	for limit != 0 {
		want := spliceChunk
		if limit > 0 {
			want = int(min(int64(want), limit))
		}
		n, err := s.fill(want)
		if err != nil {
			return total, err
		}
		if n == 0 {
			if limit > 0 {
				return total, io.ErrUnexpectedEOF
			}
			return total, nil
		}
		got, cerr := s.f.take(n, s.sent)
		if err := s.drain(got); err != nil {
			return total, err
		}
		total += int64(got)
		if cerr != nil {
			return total, cerr
		}
		if limit > 0 {
			limit -= int64(n)
		}
	}
	return total, nil
}

// fill splices up to want bytes from src into the empty pipe, waiting
// for src to be readable; 0 at src's end.
func (s *splicer) fill(want int) (n int, err error) {
	rerr := s.src.Read(func(fd uintptr) bool {
		n, err = spliceRetry(int(fd), s.w, want)
		return err != unix.EAGAIN
	})
	if rerr != nil {
		return 0, rerr
	}
	return n, err
}

// drain splices n bytes from the pipe into dst.
func (s *splicer) drain(n int) error {
	for n > 0 {
		var m int
		var err error
		werr := s.dst.Write(func(fd uintptr) bool {
			m, err = spliceRetry(s.r, int(fd), n)
			return err != unix.EAGAIN
		})
		if werr != nil {
			return werr
		}
		if err != nil {
			return err
		}
		n -= m
	}
	return nil
}

// spliceRetry is one non-blocking splice(2), retried on EINTR.
func spliceRetry(in, out, n int) (int, error) {
	for {
		m, err := unix.Splice(in, nil, out, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch err {
		case nil:
			return int(m), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, err
		default:
			return 0, os.NewSyscallError("splice", err)
		}
	}
}
