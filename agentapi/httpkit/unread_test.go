package httpkit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEarlyAnswerDoesNotWaitForTheBody: a handler that answers without
// reading the body (a refusal: no key, a budget) gets its answer to a
// client that declared a body and never sends it, and the connection
// closes: whether the answer is written as the handler returns or
// flushed inside it (WriteAll), and whether the body declared is small
// (net/http waited for up to 256 KiB of it, with no deadline, before it
// wrote anything) or too big to wait for. A body read to its end keeps
// its connection alive for the next request.
func TestEarlyAnswerDoesNotWaitForTheBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limits{ReadHeaderTimeout: time.Hour, IdleTimeout: time.Hour}
	hs := l.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/refuse":
			http.Error(w, "no key", http.StatusUnauthorized)
		case "/refuse-flushed":
			w.WriteHeader(http.StatusUnauthorized)
			_ = WriteAll(w, 0, []byte("no key\n"))
		default:
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "read %d", len(b))
		}
	}), context.Background(), nil)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	for _, path := range []string{"/refuse", "/refuse-flushed"} {
		for _, declared := range []int{100, 40 << 20} {
			t.Run(fmt.Sprintf("%s/%d", path, declared), func(t *testing.T) {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(hang)) // only a server that waits for the body meets it
				br := bufio.NewReader(c)
				// A whole body, read: the connection stays for a second request.
				fmt.Fprintf(c, "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || string(b) != "read 3" || resp.Close {
					t.Fatalf("first answer %d %q close %v, want 200 \"read 3\" on a kept connection", resp.StatusCode, b, resp.Close)
				}
				// A body declared, one byte of it sent, refused unread: the
				// answer comes, then the connection's end.
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{", path, declared)
				resp, err = http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("the refusal never came: %v", err)
				}
				b, _ = io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "no key") {
					t.Fatalf("answer %d %q, want 401 no key", resp.StatusCode, b)
				}
				if n, err := br.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("after the refusal: %d bytes, %v; want the connection closed", n, err)
				}
			})
		}
	}
}
