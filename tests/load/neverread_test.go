package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// The never-reading clients' runs: each writes neverReadOutput bytes to
// stdout and to stderr, under an output cap of 64 MiB, so its answer is
// 2 × 16 MiB of JSON, far past what a socket's buffers hold.
const (
	neverReaders    = 3
	neverReadOutput = 16 * mib
	// The figures for a normal client beside them: at least 90% of
	// its quiet-machine answers in the same time, p99 at most 1 s.
	neverReadShare = 0.9
	neverReadP99   = time.Second
	// writeDeadline is the daemon's time for the 2 × 16 MiB answer (30 s
	// plus a second per MiB) and some slack.
	writeDeadline = 30*time.Second + 2*neverReadOutput/mib*time.Second + 15*time.Second
)

// neverReading: on a daemon with 2 run slots, three clients each ask for
// a run with a 2 × 16 MiB answer and never read it. Their runs must let
// go of their slots once finished (nsbox_runs_in_flight back to 0 while
// the answers wait), a normal client's print(1) must be answered beside
// them (the figures, ≥ 90% of its quiet answers in the same time
// and p99 ≤ 1 s, are flagged, not asserted), and at full scale the
// daemon must close their connections at the write deadline with the
// answers cut.
func (s *suite) neverReading(t *testing.T, sc *scenario) {
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(conf, []byte("[max_limits]\noutput = \"64M\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := sc.start("--config", conf, "--max-concurrent", "2")
	window := min(s.scale.hostileFor, 30*time.Second)
	cl, closeIdle := sc.client()
	defer closeIdle()
	quiet := printOnes(t, cl, window, nil)

	code := fmt.Sprintf("import sys\nsys.stdout.write('x' * %d)\nsys.stdout.flush()\nsys.stderr.write('y' * %d)\n", neverReadOutput, neverReadOutput)
	body := fmt.Sprintf(`{"language":"python","code":%q,"limits":{"output_bytes":%d}}`, code, 64*mib)
	readers := make([]*neverReader, neverReaders)
	var wg sync.WaitGroup
	for i := range readers {
		c, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		readers[i] = &neverReader{c: c}
		wg.Add(1)
		go func() { defer wg.Done(); readers[i].ask(body) }()
	}
	wg.Wait()
	for i, r := range readers {
		if r.err != nil {
			t.Fatalf("never-reading client %d: %v", i, r.err)
		}
	}
	// Every answer has begun, none is read: the slots must be free.
	for deadline := time.Now().Add(30 * time.Second); ; {
		n := d.Metrics(t)["nsbox_runs_in_flight"]
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v runs still hold a slot 30 s after their answers began, which no one reads", n)
		}
		time.Sleep(50 * time.Millisecond)
	}

	beside := printOnes(t, cl, window, sc)
	share := float64(len(beside)) / float64(max(1, len(quiet)))
	p99 := percentile(beside, .99)
	flag := "met"
	if share < neverReadShare || p99 > neverReadP99 {
		flag = "MISSED (not asserted)"
	}
	sc.row.note("%d never-reading clients of 2 × %d MiB answers; print(1) answered %d times in %s beside them, %d quiet (%.0f%%), p99 %d ms; target >= %.0f%% and p99 <= %d ms %s",
		neverReaders, neverReadOutput/mib, len(beside), window, len(quiet), 100*share, p99.Milliseconds(), 100*neverReadShare, neverReadP99.Milliseconds(), flag)
	if s.scale.hostileFor < 30*time.Second {
		return // the write deadline is the unit tests' (agentapi/server)
	}
	// Past the write deadline each answer's handler has returned (its
	// request line is logged) and its connection is closed, the answer cut.
	for i, r := range readers {
		logged := "run=" + r.id
		for !strings.Contains(requestLines(d.Log.String()), logged) {
			if time.Since(r.began) > writeDeadline {
				t.Fatalf("never-reading client %d: its answer was still being written %s after it began", i, writeDeadline)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.Copy(io.Discard, r.body)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("never-reading client %d: the connection stayed open after the write deadline", i)
		} else if got >= r.size {
			t.Errorf("never-reading client %d: read all %d bytes of its answer, want it cut off", i, got)
		}
	}
	sc.row.note("their connections closed at the write deadline, answers cut")
}

// neverReader is one client that asks for a big answer and reads only
// its head (status and headers), which says the run ended.
type neverReader struct {
	c     net.Conn
	id    string
	size  int64 // the answer's Content-Length
	body  io.Reader
	began time.Time
	err   error
}

func (r *neverReader) ask(body string) {
	// The runs take a second; 30 s is far more, and far less than the
	// daemon's write deadline (about 60 s here): a run that waits for a
	// slot held by an unread answer fails here.
	_ = r.c.SetDeadline(time.Now().Add(30 * time.Second))
	req := fmt.Sprintf("POST /v1/runs HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if _, r.err = io.WriteString(r.c, req); r.err != nil {
		return
	}
	// A reader of the smallest size bufio allows, so that reading the
	// head takes next to nothing of the body.
	resp, err := http.ReadResponse(bufio.NewReaderSize(r.c, 16), nil)
	if err != nil {
		r.err = fmt.Errorf("no answer began: %w", err)
		return
	}
	_ = r.c.SetDeadline(time.Time{})
	r.began, r.id, r.size, r.body = time.Now(), resp.Header.Get(agentapi.HeaderRunID), resp.ContentLength, resp.Body
	if resp.StatusCode != http.StatusOK || r.id == "" || r.size < 2*neverReadOutput {
		r.err = fmt.Errorf("answer %s, run %q, %d bytes; want 200 with the run's 2 × %d MiB", resp.Status, r.id, r.size, neverReadOutput/mib)
	}
}

// requestLines is the daemon log's request lines.
func requestLines(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg=request") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// printOnes runs print(1) one after another for window and returns their
// latencies; each must answer "1". With sc they are recorded in its row.
func printOnes(t *testing.T, cl *client.Client, window time.Duration, sc *scenario) []time.Duration {
	t.Helper()
	var lat []time.Duration
	for end := time.Now().Add(window); time.Now().Before(end); {
		t0 := time.Now()
		res, err := cl.Run(context.Background(), &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(1)"})
		if err == nil && res.Stdout != "1\n" {
			err = fmt.Errorf("print(1): %s %q", res.Status, res.Stdout)
		}
		took := time.Since(t0)
		if sc != nil {
			sc.record(took, err)
		} else if err != nil {
			t.Errorf("print(1) on a quiet daemon: %v", err)
		}
		if err == nil {
			lat = append(lat, took)
		}
	}
	return lat
}
