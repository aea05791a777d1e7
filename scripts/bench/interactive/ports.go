package interactive

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/scripts/bench/measure"
)

// serverScript is the server on both sides: python3's http.server
// serving DIR (argv 1) on a free port of 127.0.0.1, quiet, which it
// prints on a line once it listens.
const serverScript = `
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=sys.argv[1]))
print("port", srv.server_address[1], flush=True)
srv.serve_forever()
`

// filesScript writes DIR/small and DIR/big, of SIZE bytes, in 1 MiB writes.
const filesScript = `
import os, sys
d, size = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "small"), "w").write("ok\n")
with open(os.path.join(d, "big"), "wb") as f:
    chunk = b"x" * (1 << 20)
    while size > 0:
        size -= f.write(chunk[:min(size, len(chunk))])
`

// portRows times small and large GETs of the same server run on the
// host's loopback and in session id, reached through the port proxy.
func portRows(ctx context.Context, cl *client.Client, id string, o Options) ([]Row, error) {
	dir, err := os.MkdirTemp("", "nsbox-bench-ports-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	size := strconv.FormatInt(o.Big, 10)
	if out, err := exec.CommandContext(ctx, "python3", "-c", filesScript, dir, size).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the host's files: %w: %s", err, out)
	}
	code := fmt.Sprintf("import sys\nsys.argv = ['', '/workspace/srv', %q]\nexec(%q)", size, filesScript)
	if res, err := cl.Exec(ctx, id, &agentapi.ExecRequest{Code: code}); err != nil || res.Status != agentapi.StatusOK {
		return nil, fmt.Errorf("the session's files: %v %s %s", err, resStatus(res), resError(res))
	}

	srv := exec.CommandContext(ctx, "python3", "-c", serverScript, dir)
	out, err := srv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	hostPort, err := portLine(bufio.NewReader(out).ReadString)
	if err != nil {
		return nil, fmt.Errorf("the host's server: %w", err)
	}
	term, err := cl.OpenTerminal(ctx, id, &agentapi.TerminalRequest{Cmd: "python3", Args: []string{"-c", serverScript, "/workspace/srv"}})
	if err != nil {
		return nil, err
	}
	defer term.Close()
	boxPort, err := portLine((&reader{next: func() ([]byte, error) { p, _, err := term.Next(); return p, err }}).line)
	if err != nil {
		return nil, fmt.Errorf("the session's server: %w", err)
	}
	go func() { // the server says nothing more; its exit ends the reads
		for {
			if _, x, err := term.Next(); err != nil || x != nil {
				return
			}
		}
	}()

	if cl.Socket == "" {
		return nil, errors.New("the client has no Socket")
	}
	viaUnix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", cl.Socket)
	}}}
	defer viaUnix.CloseIdleConnections()
	direct := &http.Client{Transport: &http.Transport{}}
	defer direct.CloseIdleConnections()
	hostURL := "http://127.0.0.1:" + hostPort + "/"
	boxURL := "http://nsbox/" + agentapi.Version + "/sessions/" + id + "/ports/" + boxPort + "/"

	var smallHost, smallBox []time.Duration
	for range o.Requests {
		for _, side := range []struct {
			c   *http.Client
			url string
			dst *[]time.Duration
		}{{direct, hostURL, &smallHost}, {viaUnix, boxURL, &smallBox}} {
			t0 := time.Now()
			if err := get(ctx, side.c, side.url+"small", 3); err != nil {
				return nil, err
			}
			*side.dst = append(*side.dst, time.Since(t0))
		}
	}
	var bigHost, bigBox []float64
	for range o.BigRuns {
		for _, side := range []struct {
			c   *http.Client
			url string
			dst *[]float64
		}{{direct, hostURL, &bigHost}, {viaUnix, boxURL, &bigBox}} {
			t0 := time.Now()
			if err := get(ctx, side.c, side.url+"big", o.Big); err != nil {
				return nil, err
			}
			*side.dst = append(*side.dst, float64(o.Big)/(1<<20)/time.Since(t0).Seconds())
		}
	}
	return []Row{
		msRow("GET of 3 bytes: the port proxy vs the host's loopback", smallHost, smallBox, "<= 0.5 ms added"),
		{What: fmt.Sprintf("GET of %d MiB: the port proxy vs the host's loopback", o.Big>>20), Unit: "MiB/s", Runs: len(bigBox),
			Direct: measure.Median(bigHost), Nsbox: measure.Median(bigBox), Target: ">= 0.8x direct"},
	}, nil
}

// get GETs url with c and reads its body, which must be of want bytes.
func get(ctx context.Context, c *http.Client, url string, want int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	switch {
	case err != nil:
		return fmt.Errorf("GET %s: %w", url, err)
	case resp.StatusCode != http.StatusOK || n != want:
		return fmt.Errorf("GET %s: %s, %d bytes, want 200 and %d", url, resp.Status, n, want)
	}
	return nil
}

// portLine reads lines until the server's "port N" and returns N.
func portLine(readLine func(byte) (string, error)) (string, error) {
	for {
		l, err := readLine('\n')
		if err != nil {
			return "", err
		}
		if f := strings.Fields(l); len(f) == 2 && f[0] == "port" {
			return f[1], nil
		}
	}
}

func resStatus(r *agentapi.RunResult) string {
	if r == nil {
		return ""
	}
	return r.Status
}

func resError(r *agentapi.RunResult) string {
	if r == nil {
		return ""
	}
	return r.Error + r.Stderr
}
