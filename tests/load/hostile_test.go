package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// healthTarget is the latency target for a normal client's health
// checks beside hostile connections: reported and flagged, not asserted.
const healthTarget = 100 * time.Millisecond

// bodyDeadline is the daemon's time for a request body (and some slack):
// a slow body must have been answered 408 and closed by then.
const bodyDeadline = 32 * time.Second

// hostileConns: idle keep-alive connections (one request each, then
// silence) and slow-body connections (a run request whose body comes one
// byte a second) stay open while a normal client checks health every
// 20 ms and runs code every second: it must be served throughout. Past
// the daemon's 30 s body deadline (full scale) every slow connection must
// have been answered and closed.
func (s *suite) hostileConns(t *testing.T, sc *scenario) {
	d := sc.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range s.scale.idle {
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: nsbox\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(conns), err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var closed atomic.Int64 // slow connections the daemon answered and closed
	var answers sync.Map    // what the slow connections got
	var wg sync.WaitGroup
	for range s.scale.slow {
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatalf("slow connection: %v", err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { // a byte a second
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			answer := "no answer"
			if err == nil {
				answer = resp.Status
				if resp.StatusCode == http.StatusRequestTimeout {
					if _, err := io.Copy(io.Discard, resp.Body); err == nil {
						if _, err := c.Read(make([]byte, 1)); err != nil && ctx.Err() == nil {
							closed.Add(1) // closed by the daemon, not by the test's end
						}
					}
				}
			}
			answers.Store(answer, true)
		}()
	}

	cl, closeIdle := sc.client()
	defer closeIdle()
	end := time.Now().Add(s.scale.hostileFor)
	lastRun := time.Now()
	var health []time.Duration
	for time.Now().Before(end) {
		t0 := time.Now()
		_, err := cl.Health(ctx)
		health = append(health, time.Since(t0))
		sc.record(time.Since(t0), err)
		if time.Since(lastRun) >= time.Second {
			lastRun = time.Now()
			sc.timed(func() error {
				res, err := cl.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print('served')"})
				if err == nil && res.Stdout != "served\n" {
					err = fmt.Errorf("run beside hostile connections: %s %q", res.Status, res.Stdout)
				}
				return err
			})
		}
		time.Sleep(20 * time.Millisecond)
	}
	slowClosed := closed.Load()
	cancel()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()

	p99 := percentile(health, .99)
	flag := "met"
	if p99 >= healthTarget {
		flag = "MISSED (not asserted)"
	}
	sc.row.note("%d idle + %d slow conns for %s; health p99 %d ms, target < %d ms %s",
		s.scale.idle, s.scale.slow, s.scale.hostileFor, p99.Milliseconds(), healthTarget.Milliseconds(), flag)
	if s.scale.hostileFor < bodyDeadline {
		return
	}
	var got []string
	answers.Range(func(k, _ any) bool { got = append(got, k.(string)); return true })
	sc.row.note("%d of %d slow conns answered 408 and closed (answers: %s)", slowClosed, s.scale.slow, strings.Join(got, ", "))
	if slowClosed != int64(s.scale.slow) {
		t.Errorf("after %s only %d of %d slow-body connections were answered 408 and closed", s.scale.hostileFor, slowClosed, s.scale.slow)
	}
}

// bigBodies: concurrent 60 MiB run bodies (a file for the workspace).
// Each is answered with its run or refused with 429 (the daemon's body
// budget); the daemon's memory is held to the E2B bodies' figures
// (memoryBounds: at most 500 MiB, back under 64 MiB within 10 s once its
// sandboxes are gone).
func (s *suite) bigBodies(t *testing.T, sc *scenario) {
	const size = 60 * mib
	d := sc.start()
	body, err := json.Marshal(&agentapi.RunRequest{Language: agentapi.LanguagePython,
		Code:  "import os\nprint(os.path.getsize('big.txt'))",
		Files: []agentapi.File{{Path: "big.txt", Text: strings.Repeat("x", size)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range s.scale.bigBodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc.timed(func() error {
				resp, err := d.HTTP.Post("http://nsbox/v1/runs", "application/json", bytes.NewReader(body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode == http.StatusTooManyRequests {
					refused.Add(1)
					return nil
				}
				var res agentapi.RunResult
				if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil || res.Stdout != fmt.Sprintf("%d\n", size) {
					return fmt.Errorf("60 MiB body: %s %.300s", resp.Status, b)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	sc.row.note("%d of %d refused 429", refused.Load(), s.scale.bigBodies)
	if refused.Load() == int64(s.scale.bigBodies) {
		t.Errorf("every one of %d big bodies was refused", s.scale.bigBodies)
	}
	d.HTTP.CloseIdleConnections()
	d.Settle(t)
	sc.memoryBounds(d, fmt.Sprintf("%d concurrent 60 MiB run bodies", s.scale.bigBodies))
}
