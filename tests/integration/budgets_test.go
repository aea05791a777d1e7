package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBudgetsConfig: [budgets] reaches the daemon. /v1/info reports the
// result and body budgets the file set, and the body budget is the one
// enforced: with bodies = "64M", a 40 MiB body held open (its length
// declared, so reserved before a byte is read) leaves no room for a
// second 40 MiB body, which gets 429; the default budget (128 MiB) would
// take both.
func TestBudgetsConfig(t *testing.T) {
	const mib = 1 << 20
	d := startDaemon(t, "--config", writeConf(t, "[budgets]\nresults = \"32M\"\nbodies = \"64M\"\npeer_conns_per_second = 64\n"))
	info, err := d.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.ResultBudgetBytes != 32*mib || info.BodyBudgetBytes != 64*mib {
		t.Fatalf("/v1/info: result_budget_bytes %d, body_budget_bytes %d; want %d and %d from [budgets]", info.ResultBudgetBytes, info.BodyBudgetBytes, 32*mib, 64*mib)
	}

	const size = 40 * mib
	hold := func() net.Conn {
		held, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(held, "POST /v1/runs HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size); err != nil {
			t.Fatal(err)
		}
		return held
	}
	body := `{"argv":["true"],"env":{"PAD":"` + strings.Repeat("y", size-40) + `"}}`
	until429(t, "a second 40 MiB body beside a held one", `[budgets] bodies = "64M"`, "64 MiB budget", hold, func() (*http.Response, error) {
		return d.http.Post("http://nsbox/v1/runs", "application/json", strings.NewReader(body))
	})
}

// until429 holds a request open (hold sends all but its body's end) and
// sends what beside it until one of the two is answered 429, whose body
// must name the budget (want) that config sets. The held request counts
// once its handler runs; until then what is served as any request, and
// on a loaded machine what may be counted first: then the held one is
// the one refused (the server answers a refusal at once, without waiting
// for the body it will never get). A held request answered otherwise (its
// body's deadline) is held again. The minute's deadline only ends a
// server that never refuses.
func until429(t *testing.T, what, config, want string, hold func() net.Conn, send func() (*http.Response, error)) {
	t.Helper()
	held := hold()
	defer func() { held.Close() }()
	refused := func(status int, msg []byte) bool {
		if status != http.StatusTooManyRequests {
			return false
		}
		if !strings.Contains(string(msg), want) {
			t.Errorf("429 %s: want it to name the budget (%q)", msg, want)
		}
		return true
	}
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := send()
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if refused(resp.StatusCode, msg) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %.300s; want 429 under %s", what, resp.StatusCode, msg, config)
		}
		// Has the held request been answered? A short look, not a verdict.
		held.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		br := bufio.NewReader(held)
		if _, err := br.Peek(1); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() { // closed unanswered (a connection parked past its wait)
				held.Close()
				held = hold()
			}
			continue
		}
		held.SetReadDeadline(time.Now().Add(time.Minute))
		hr, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the held request's answer: %v", err)
		}
		hmsg, _ := io.ReadAll(hr.Body)
		if refused(hr.StatusCode, hmsg) {
			return
		}
		held.Close()
		held = hold()
	}
}

// TestE2BKeyRequestsConfig: [e2b] key_requests reaches the endpoint. With
// key_requests = 1, a create whose body is still coming is the key's one
// request in flight, and the key's next request gets 429 naming the
// budget; the default (512) would serve it.
func TestE2BKeyRequestsConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	key := "e2b_" + strings.Repeat("5a", 20)
	keys := filepath.Join(t.TempDir(), "e2b-keys")
	if err := os.WriteFile(keys, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[e2b]\nlisten = %q\nkeys_file = %q\nkey_requests = 1\n", addr, keys)))
	hold := func() net.Conn {
		held, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(held, "POST /sandboxes HTTP/1.1\r\nHost: %s\r\nX-API-KEY: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr, key); err != nil {
			t.Fatal(err)
		}
		return held
	}
	until429(t, "the key's second request beside a held one", "[e2b] key_requests = 1", "1 requests in flight", hold, func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/sandboxes", nil)
		req.Header.Set("X-API-KEY", key)
		return http.DefaultClient.Do(req)
	})
}
