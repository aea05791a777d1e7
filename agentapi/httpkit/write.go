package httpkit

import (
	"net/http"
	"time"
)

// MinReadRate is the slowest reading a client's answer is given time for,
// in bytes a second, on top of WriteTimeout: a client on the other end of
// a slow link (8 Mbit/s) takes the largest run answer (two 64 MiB outputs)
// in time; one that stops reading holds its connection and the answer's
// memory no longer than that.
const MinReadRate = 1 << 20

// WriteDeadline is when an answer of n bytes, written from now, must have
// been taken by the client: timeout (zero: DefaultWriteTimeout) plus a
// second per MinReadRate bytes of it.
func WriteDeadline(timeout time.Duration, n int) time.Time {
	if timeout <= 0 {
		timeout = DefaultWriteTimeout
	}
	return time.Now().Add(timeout + time.Duration(n)*time.Second/MinReadRate)
}

// WriteAll writes b to w and flushes it within WriteDeadline(timeout,
// len(b)), then clears the deadline for the connection's next request.
// Past the deadline the write fails, net/http closes the connection, and
// the handler can return and free what the answer held: a client that
// never reads holds nothing for ever.
func WriteAll(w http.ResponseWriter, timeout time.Duration, b []byte) error {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(WriteDeadline(timeout, len(b)))
	_, err := w.Write(b)
	if err == nil {
		err = rc.Flush()
	}
	_ = rc.SetWriteDeadline(time.Time{})
	return err
}
