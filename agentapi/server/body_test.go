package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// rawConn opens a connection to the test server's socket; the deadline
// only keeps a broken test from hanging.
func rawConn(t *testing.T, ts *testServer) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// startBody sends a POST /v1/runs whose Content-Length is n, with only the
// first part of the body.
func startBody(t *testing.T, c net.Conn, n int, part string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "POST /v1/runs HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", n, part); err != nil {
		t.Fatal(err)
	}
}

func readStatus(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp, b.String()
}

// bigRun is a run request of exactly n bytes.
func bigRun(n int) string {
	head, tail := `{"argv":["true"],"env":{"PAD":"`, `"}}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestDeclaredOversizeBodyRefusedUnread(t *testing.T) {
	ts := startServer(t, nil, func(c *testConfig) { c.MaxBodyBytes = 1 << 20 })
	c := rawConn(t, ts)
	startBody(t, c, 1<<40, "") // a terabyte is announced; nothing is sent
	resp, body := readStatus(t, c)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "payload_too_large") {
		t.Errorf("answer %d %s, want 413 payload_too_large before the body", resp.StatusCode, body)
	}
}

func TestBodyBudget(t *testing.T) {
	const max = 64 << 10
	ts := startServer(t, nil, func(c *testConfig) { c.MaxBodyBytes, c.MaxBodyBytesInFlight = max, max+max/2 })
	first := bigRun(max)
	a := rawConn(t, ts)
	startBody(t, a, len(first), first[:max/2]) // holds its reservation while it trickles
	// Wait until the server has reserved it: a competitor sent before that
	// would take the budget first and get the held body refused instead.
	for deadline := time.Now().Add(10 * time.Second); ts.srv.bodies.InUse() != int64(len(first)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the held body's %d bytes never showed in the budget (%d in use)", len(first), ts.srv.bodies.InUse())
		}
	}
	// The second full-size body does not fit beside the first.
	_, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"true"}, Env: map[string]string{"PAD": strings.Repeat("y", max-100)}})
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || !strings.Contains(ae.Message, "budget") || ae.RetryAfter <= 0 {
		t.Fatalf("second big body beside a held one: %v, want 429 naming the budget with Retry-After", err)
	}
	// A small request still fits.
	if _, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"true"}}); err != nil {
		t.Errorf("small request beside a held big one: %v", err)
	}
	if _, err := a.Write([]byte(first[max/2:])); err != nil {
		t.Fatal(err)
	}
	if resp, body := readStatus(t, a); resp.StatusCode != http.StatusOK {
		t.Fatalf("the held body, once complete: %d %s", resp.StatusCode, body)
	}
	// Given back before the answer went out, not after it.
	if n := ts.srv.bodies.InUse(); n != 0 {
		t.Fatalf("%d body bytes still reserved once the held body was answered", n)
	}
	if _, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"true"}, Env: map[string]string{"PAD": strings.Repeat("y", max-100)}}); err != nil {
		t.Errorf("big body once the budget is free again: %v", err)
	}
}

func TestSlowBodyTimesOut(t *testing.T) {
	ts := startServer(t, nil, func(c *testConfig) { c.BodyTimeout = 300 * time.Millisecond })
	c := rawConn(t, ts)
	startBody(t, c, 100, `{"argv":`) // and then nothing
	resp, body := readStatus(t, c)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") || !resp.Close {
		t.Errorf("answer %d close=%v %s, want 408 request_timeout and the connection closed", resp.StatusCode, resp.Close, body)
	}
	// Closed, not held open to drain the rest of the body from a client
	// that may never send it. The deadline only ends a hang: the server
	// closes right after the answer.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after the 408 the connection reads %d bytes, %v; want it closed (EOF)", n, err)
	}
}

// TestIdleAndSlowClientsDoNotLockOut holds 200 idle keep-alive connections
// and 80 connections trickling a body, then checks a new client is served.
func TestIdleAndSlowClientsDoNotLockOut(t *testing.T) {
	ts := startServer(t, nil, nil)
	for range 200 {
		c := rawConn(t, ts)
		if _, err := fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: nsbox\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, _ := readStatus(t, c); resp.StatusCode != http.StatusOK {
			t.Fatalf("health: %d", resp.StatusCode)
		}
	}
	for range 80 {
		startBody(t, rawConn(t, ts), 1000, `{"argv":["tr`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ts.client.Health(ctx); err != nil {
		t.Fatalf("a new client beside 200 idle and 80 slow connections: %v", err)
	}
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}}); err != nil {
		t.Fatalf("a run beside 200 idle and 80 slow connections: %v", err)
	}
}

// TestBigHeaderRefused: a 1 MiB header, under Go's default cap, is over
// httpkit's (64 KiB) and answered 431 without being served.
func TestBigHeaderRefused(t *testing.T) {
	ts := startServer(t, nil, nil)
	c := rawConn(t, ts)
	go func() {
		_, _ = fmt.Fprintf(c, "GET /v1/health HTTP/1.1\r\nHost: nsbox\r\nX-Pad: %s\r\n\r\n", strings.Repeat("a", 1<<20))
	}()
	if resp, body := readStatus(t, c); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 1 MiB header: %d %s, want 431", resp.StatusCode, body)
	}
}
