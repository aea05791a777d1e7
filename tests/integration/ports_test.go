package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// serveIn starts `python3 ARGS... PORT` in session id's sandbox, in its
// workspace, and returns once it accepts connections (the cell waits for
// it inside the sandbox).
func serveIn(t *testing.T, d *daemon, id string, port int, args ...string) {
	t.Helper()
	argv, _ := json.Marshal(append(args, strconv.Itoa(port)))
	code := fmt.Sprintf(`import socket, subprocess, sys, time
srv = subprocess.Popen([sys.executable] + %s,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
deadline = time.monotonic() + 60
while True:
    try:
        socket.create_connection(("127.0.0.1", %d)).close()
        break
    except OSError:
        if time.monotonic() > deadline or srv.poll() is not None:
            raise
        time.sleep(0.05)
`, argv, port)
	res, err := d.client.Exec(context.Background(), id, &agentapi.ExecRequest{Code: code})
	if err != nil || res.Status != "ok" {
		t.Fatalf("starting the server: %v %+v", err, res)
	}
}

// get sends method path to d's socket and returns the status and body.
func (d *daemon) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := d.http.Get("http://nsbox" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestPortProxy: a server started in a session (python3 -m http.server)
// is reached through /v1/sessions/{id}/ports/{port}/ by the session's
// owner, and counted in the session's record and the metrics; a closed
// port is a 502 naming it; another uid is refused as for the session's
// other routes (404); the session's end leaves nothing behind.
func TestPortProxy(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.client.PutFile(ctx, sess.ID, "hello.txt", strings.NewReader("hello from the sandbox\n")); err != nil {
		t.Fatal(err)
	}
	serveIn(t, d, sess.ID, 8000, "-m", "http.server", "--bind", "127.0.0.1")
	base := "/v1/sessions/" + sess.ID + "/ports/"

	status, body := d.get(t, base+"8000/hello.txt")
	if status != http.StatusOK || body != "hello from the sandbox\n" {
		t.Errorf("GET through the port: %d %q", status, body)
	}
	status, body = d.get(t, base+"8000/?q=1")
	if status != http.StatusOK || !strings.Contains(body, "hello.txt") {
		t.Errorf("the directory listing: %d %q", status, body)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://nsbox"+base+"8000?q=1", nil)
	resp, err := d.http.Transport.RoundTrip(req) // a browser-style client is sent to the root
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusPermanentRedirect || loc != base+"8000/?q=1" {
		t.Errorf("GET %s8000: %d to %q, want 308 to the root", base, resp.StatusCode, loc)
	}

	status, body = d.get(t, base+"8001/")
	var e agentapi.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || status != http.StatusBadGateway ||
		e.Error.Code != agentapi.CodeBadGateway || !strings.Contains(e.Error.Message, "port 8001") {
		t.Errorf("a closed port: %d %s, want 502 bad_gateway naming port 8001", status, body)
	}
	if status, body := d.get(t, base+"0/"); status != http.StatusBadRequest {
		t.Errorf("port 0: %d %s", status, body)
	}

	// Another local user who can reach the socket cannot reach the port.
	openToAll(t, d)
	curl := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", d.sock, "http://nsbox"+base+"8000/hello.txt")
	curl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := curl.Output()
	if err != nil || string(out) != "404" {
		t.Errorf("uid %d through the port: %v %q, want 404", nobody, err, out)
	}
	// Nor through the raw tunnel `nsbox session port` uses.
	curl = exec.Command("curl", "-sS", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", d.sock,
		"-H", "Connection: Upgrade", "-H", "Upgrade: tcp", "http://nsbox"+base+"8000")
	curl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err = curl.Output()
	if err != nil || string(out) != "404" {
		t.Errorf("uid %d through the tunnel: %v %q, want 404", nobody, err, out)
	}

	got, err := d.client.Session(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Ports; p == nil || p.Connections != 2 || p.Open != 0 || p.BytesReceived == 0 || p.BytesSent == 0 {
		t.Errorf("the session's ports: %+v, want 2 connections, none open, bytes each way", p)
	}
	_, metrics := d.get(t, "/metrics")
	if !strings.Contains(metrics, "nsbox_port_connections_total 2\n") {
		t.Errorf("metrics: no nsbox_port_connections_total 2")
	}

	if err := d.client.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if status, _ := d.get(t, base+"8000/"); status != http.StatusNotFound {
		t.Errorf("after the session's end: %d, want 404", status)
	}
	d.assertClean(t, sess.ID)
}

// TestPortProxyStreams: through /v1's port route, a WebSocket echoes
// both ways, server-sent events arrive as the server sends them (the
// second is sent only once the client, having read the first, asks for
// it: a proxy that held the stream back hangs), and a 4 MiB request body
// arrives whole. The server is tests/integration/testdata/portserver.py,
// Python's standard library, in the sandbox.
func TestPortProxyStreams(t *testing.T) {
	d, sess := portServerSession(t)
	ctx := context.Background()
	base := "/v1/sessions/" + sess.ID + "/ports/8002"

	t.Run("websocket", func(t *testing.T) {
		c, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wsEcho(t, c, base+"/ws")
	})

	t.Run("server-sent events", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://nsbox"+base+"/events", nil)
		resp, err := d.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
			t.Fatalf("events: %d %q", resp.StatusCode, ct)
		}
		br := bufio.NewReader(resp.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
			t.Fatalf("first event: %q %v", line, err)
		}
		if status, body := d.get(t, base+"/go"); status != http.StatusOK || body != "released" {
			t.Fatalf("/go: %d %q", status, body)
		}
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "\ndata: second\n\n" {
			t.Errorf("the rest of the stream: %q %v", rest, err)
		}
	})

	t.Run("request body", func(t *testing.T) {
		body := bytes.Repeat([]byte("0123456789abcdef"), 256<<10)
		resp, err := d.http.Post("http://nsbox"+base+"/len", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := sha256.Sum256(body)
		if want := fmt.Sprintf("%d %x", len(body), sum); string(got) != want {
			t.Errorf("POST /len: %q, want %q", got, want)
		}
	})

	if err := d.client.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	d.assertClean(t, sess.ID)
}

// wsEcho upgrades c to a WebSocket at path and checks that two messages
// (one with a 16-bit length) come back, as portserver.py echoes them.
func wsEcho(t *testing.T, c net.Conn, path string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // only a hang fails
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: nsbox\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("upgrade: %s %v", resp.Status, resp.Header)
	}
	for _, msg := range []string{"hello", strings.Repeat("x", 300)} {
		mask := [4]byte{1, 2, 3, 4}
		frame := []byte{0x81}
		if len(msg) < 126 {
			frame = append(frame, 0x80|byte(len(msg)))
		} else {
			frame = append(frame, 0x80|126, byte(len(msg)>>8), byte(len(msg)))
		}
		frame = append(frame, mask[:]...)
		for i := range len(msg) {
			frame = append(frame, msg[i]^mask[i%4])
		}
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 2)
		if _, err := io.ReadFull(br, head); err != nil {
			t.Fatal(err)
		}
		n := int(head[1])
		if n == 126 {
			ext := make([]byte, 2)
			if _, err := io.ReadFull(br, ext); err != nil {
				t.Fatal(err)
			}
			n = int(ext[0])<<8 | int(ext[1])
		}
		echo := make([]byte, n)
		if _, err := io.ReadFull(br, echo); err != nil {
			t.Fatal(err)
		}
		if head[0] != 0x81 || string(echo) != msg {
			t.Errorf("echo of %d bytes: opcode %#x, %d bytes", len(msg), head[0], len(echo))
		}
	}
}

// TestSessionPortCLI: `nsbox session port ID PORT --listen 127.0.0.1:0`
// forwards a local TCP port to the session's server, as a browser would
// use it: plain HTTP requests on a kept-alive connection and a WebSocket
// echo; a non-loopback --listen is refused; Ctrl-C ends it (exit 0).
func TestSessionPortCLI(t *testing.T) {
	d, sess := portServerSession(t)
	ctx := context.Background()

	out, err := exec.Command(nsboxBin, "session", "port", "--socket", d.sock, "--listen", "0.0.0.0:0", sess.ID, "8002").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a loopback address") {
		t.Errorf("--listen 0.0.0.0:0: %v %s, want refused", err, out)
	}

	cmd := exec.Command(nsboxBin, "session", "port", "--socket", d.sock, "--listen", "127.0.0.1:0", sess.ID, "8002")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var addr string
	if _, serr := fmt.Sscanf(line, "forwarding %s to port 8002", &addr); err != nil || serr != nil {
		t.Fatalf("first line %q: %v %v (%s)", line, err, serr, stderr.String())
	}

	hc := &http.Client{}
	for i := range 3 { // a browser keeps its connection: three requests on one tunnel
		resp, err := hc.Post("http://"+addr+"/len", "text/plain", strings.NewReader(strings.Repeat("y", i*1000)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasPrefix(string(b), strconv.Itoa(i*1000)+" ") {
			t.Errorf("POST /len of %d bytes: %q", i*1000, b)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	wsEcho(t, c, "/ws")
	c.Close()

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after Ctrl-C: %v (%s)", err, stderr.String())
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Errorf("%s still accepts after Ctrl-C", addr)
	}
	if err := d.client.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	d.assertClean(t, sess.ID)
}

// portServerSession starts a daemon and a session serving
// testdata/portserver.py (Python's standard library) on port 8002.
func portServerSession(t *testing.T) (*daemon, *agentapi.Session) {
	t.Helper()
	d := startDaemon(t)
	ctx := context.Background()
	sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/portserver.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.client.PutFile(ctx, sess.ID, "portserver.py", bytes.NewReader(src)); err != nil {
		t.Fatal(err)
	}
	serveIn(t, d, sess.ID, 8002, "portserver.py")
	return d, sess
}
