package portproxy

import (
	"io"
	"net"
	"sync"
)

// Join copies a to b and b to a until both directions have ended, passes
// each direction's end on as a half-close (so a client that shuts its
// writing still gets the whole answer), and closes both. ar, when not
// nil, is what a is read from (a hijacked connection's buffered reader).
func Join(a net.Conn, ar io.Reader, b net.Conn) {
	if ar == nil {
		ar = a
	}
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst net.Conn, src io.Reader) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if err != nil || !closeWrite(dst) {
			// Broken, or no half-close: end both directions now.
			a.Close()
			b.Close()
		}
	}
	go half(b, ar)
	go half(a, b)
	wg.Wait()
	a.Close()
	b.Close()
}

// closeWrite half-closes c, looking through wrappers (Unwrap); false when
// c cannot be.
func closeWrite(c net.Conn) bool {
	for {
		if hc, ok := c.(interface{ CloseWrite() error }); ok {
			return hc.CloseWrite() == nil
		}
		u, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			return false
		}
		c = u.Unwrap()
	}
}
