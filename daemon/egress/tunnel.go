package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
)

// spliceChunk is the most a tunnel moves between two counts against the
// byte cap.
const spliceChunk = 1 << 20

// maxRecord is the longest TLS record body (TLSCiphertext: 2^14 + 2048).
const maxRecord = 1<<14 + 2048

// errNotTLS ends a tunnel whose sandbox sent something other than a TLS
// record after its ClientHello.
var errNotTLS = errors.New("not a TLS record after the ClientHello; a tunnel carries only TLS")

// A copier moves up to limit bytes (limit < 0: to the source's end) from
// one side of a tunnel to the other, counting each batch with take
// between reading it and delivering it.
type copier interface {
	copyN(limit int64) (int64, error)
	Close()
}

func newCopier(dst, src net.Conn, f *flow, sent bool) copier {
	if s, ok := newSplicer(dst, src, f, sent); ok {
		return s
	}
	return &bufCopier{dst: dst, src: src, f: f, sent: sent, buf: bufferPool{}.Get()}
}

// bufCopier is a copier through a buffer in user space: for what the
// proxy has already read (the ClientHello), and connections that are not
// sockets.
type bufCopier struct {
	dst  io.Writer
	src  io.Reader
	f    *flow
	sent bool
	buf  []byte
}

func (c *bufCopier) Close() {
	if len(c.buf) == 256<<10 {
		bufferPool{}.Put(c.buf)
	}
}

func (c *bufCopier) copyN(limit int64) (int64, error) {
	var total int64
	for limit != 0 {
		b := c.buf
		if limit > 0 && int64(len(b)) > limit {
			b = b[:limit]
		}
		n, err := c.src.Read(b)
		got, cerr := c.f.take(n, c.sent)
		if got > 0 {
			if _, werr := c.dst.Write(b[:got]); werr != nil {
				return total, werr
			}
			total += int64(got)
		}
		if cerr != nil {
			return total, cerr
		}
		if limit > 0 {
			limit -= int64(n)
		}
		if err == io.EOF {
			if limit > 0 {
				return total, io.ErrUnexpectedEOF
			}
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// tunnel joins the sandbox's connection to upstream, the sandbox's side
// starting with pre (the ClientHello and whatever the proxy read past
// it), until both sides are done; an error either way (a cap, a reset,
// bytes that are not TLS) ends both, and is returned.
//
// Upstream's bytes move inside the kernel (splice). The sandbox's go
// record by record: each TLS record header is read and checked (a content
// type of 20-23, version 3.x, a length within maxRecord) before anything
// of its record moves, and its body is spliced; a header that fails ends
// the tunnel, so plain text after a valid ClientHello never reaches the
// upstream.
func tunnel(sandbox, upstream net.Conn, pre []byte, f *flow) error {
	errc := make(chan error, 2)
	end := func(dst net.Conn, err error) {
		if err == nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			} else {
				dst.Close()
			}
		}
		errc <- err
	}
	go func() { end(upstream, pumpRecords(upstream, sandbox, pre, f)) }()
	go func() {
		c := newCopier(sandbox, upstream, f, false)
		defer c.Close()
		_, err := c.copyN(-1)
		end(sandbox, err)
	}()
	var first error
	for range 2 {
		if err := <-errc; err != nil {
			sandbox.Close()
			upstream.Close()
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// pumpRecords copies the sandbox's TLS records from src (after pre) to
// dst, checking each header first; src's end between two records is a
// clean end.
func pumpRecords(dst, src net.Conn, pre []byte, f *flow) error {
	preR := bytes.NewReader(pre)
	in := io.MultiReader(preR, src)
	buffered := &bufCopier{dst: dst, src: in, f: f, sent: true, buf: make([]byte, maxRecord)}
	spliced := newCopier(dst, src, f, true)
	defer spliced.Close()
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(in, hdr[:1]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if _, err := io.ReadFull(in, hdr[1:]); err != nil {
			return err
		}
		n, err := recordLen(hdr)
		if err != nil {
			return err
		}
		got, cerr := f.take(len(hdr), true)
		if _, err := dst.Write(hdr[:got]); err != nil {
			return err
		}
		if cerr != nil {
			return cerr
		}
		body := copier(spliced)
		if preR.Len() > 0 {
			body = buffered
		}
		if _, err := body.copyN(int64(n)); err != nil {
			return err
		}
	}
}

// recordLen checks a TLS record header and returns its body's length.
func recordLen(h [5]byte) (int, error) {
	n := int(h[3])<<8 | int(h[4])
	if h[0] < 20 || h[0] > 23 || h[1] != 3 || n > maxRecord {
		return 0, fmt.Errorf("%w (a header of % x)", errNotTLS, h)
	}
	return n, nil
}
