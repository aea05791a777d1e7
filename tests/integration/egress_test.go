package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/egress/egresstest"
)

// upstream is a test server on 127.0.0.1, the only kind of upstream the
// egress tests reach (through the daemon's [network.hosts] resolver).
type upstream struct {
	srv  *httptest.Server
	port int

	mu    sync.Mutex
	hits  map[string]int      // path -> requests
	auths map[string][]string // path -> the Authorization headers seen
	conns int
}

func (u *upstream) hit(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[path]
}

func (u *upstream) auth(path string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.auths[path]
}

// wheelName is the wheel the local PEP 503 index serves.
const wheelName = egresstest.WheelName

// newUpstream serves /hello, /auth (echoes Authorization), /big?n=BYTES,
// and a PEP 503 index of one wheel (/simple/nsboxdemo/, /files/WHEEL).
func newUpstream(t *testing.T, cert *tls.Certificate) *upstream {
	t.Helper()
	u := &upstream{hits: map[string]int{}, auths: map[string][]string{}}
	index, err := egresstest.NewIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from upstream") })
	// /auth answers "ok"; the test reads what it saw (auth), so a secret's
	// value never travels back into the sandbox.
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(bytes.Repeat([]byte("x"), n))
	})
	mux.Handle("/", index) // /PREFIX/simple/nsboxdemo/ and /PREFIX/files/WHEEL
	// An npm registry of one package, as `npm install` asks for it.
	tarball := []byte("an npm tarball")
	integrity := sha512.Sum512(tarball)
	mux.HandleFunc("/npm/demo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
		fmt.Fprintf(w, `{"name":"demo","versions":{"1.0.0":{"dist":{"tarball":"http://%s/npm/demo/-/demo-1.0.0.tgz","integrity":"sha512-%s"}}}}`,
			r.Host, base64.StdEncoding.EncodeToString(integrity[:]))
	})
	mux.HandleFunc("/npm/demo/-/demo-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) { w.Write(tarball) })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.hits[r.URL.Path]++
		if a := r.Header.Get("Authorization"); a != "" {
			u.auths[r.URL.Path] = append(u.auths[r.URL.Path], a)
		}
		u.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
	u.srv = httptest.NewUnstartedServer(h)
	u.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
		}
	}
	if cert != nil {
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	t.Cleanup(u.srv.Close)
	u.port = u.srv.Listener.Addr().(*net.TCPAddr).Port
	return u
}

// testCA makes a CA and a leaf certificate for names, and writes the CA
// to a PEM file.
func testCA(t *testing.T, names ...string) (leaf *tls.Certificate, caFile string, caPEM []byte) {
	t.Helper()
	leaf, caPEM, err := egresstest.NewCert(names...)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return leaf, caFile, caPEM
}

// egressSetup is a daemon with a [network] config and its upstreams: plain
// (files.test, other.test), TLS (tls.test with the secret, other-tls.test
// without), a loopback port nobody opened (rebind.test) and the metadata
// address (meta.test).
type egressSetup struct {
	d          *daemon
	plain, tls *upstream
	closedPort int
	caPEM      []byte
	secret     string
	secretFile string
}

func newEgressSetup(t *testing.T, rootfs string, extra ...string) *egressSetup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon runs sandboxes")
	}
	leaf, caFile, caPEM := testCA(t, "tls.test", "other-tls.test")
	s := &egressSetup{plain: newUpstream(t, nil), tls: newUpstream(t, leaf), caPEM: caPEM}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closed.Close() })
	s.closedPort = closed.Addr().(*net.TCPAddr).Port

	b := make([]byte, 16)
	rand.Read(b)
	s.secret = "real-" + hex.EncodeToString(b)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "token")
	s.secretFile = secretFile
	if err := os.WriteFile(secretFile, []byte(s.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, tp := s.plain.port, s.tls.port
	conf := fmt.Sprintf(`
[network]
allow = ["files.test:%d", "other.test:%d", "tls.test:%d", "other-tls.test:%d", "rebind.test:%d", "meta.test", "*.wild.test:%d"]
open = ["127.0.0.1:%d", "127.0.0.1:%d"]
cache_hosts = ["tls.test:%d"]

[network.hosts]
"files.test" = "127.0.0.1"
"other.test" = "127.0.0.1"
"tls.test" = "127.0.0.1"
"other-tls.test" = "127.0.0.1"
"rebind.test" = "127.0.0.1"
"meta.test" = "169.254.169.254"
"a.wild.test" = "127.0.0.1"

[network.secrets.NSBOX_TEST_TOKEN]
file = %q
hosts = ["tls.test:%d"]
`, p, p, tp, tp, s.closedPort, p, p, tp, tp, secretFile, tp)
	confFile := filepath.Join(dir, "nsbox.toml")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// The proxy verifies upstream certificates against the host's roots:
	// here, the test CA.
	t.Setenv("SSL_CERT_FILE", caFile)
	s.d = startDaemon(t, append([]string{"--config", confFile, "--default-rootfs", rootfs}, extra...)...)
	return s
}

// run runs Python code with a network policy and returns the result.
func (s *egressSetup) run(t *testing.T, code string, network *agentapi.Network) *agentapi.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files := []agentapi.File{{Path: "test-ca.pem", Text: string(s.caPEM)}}
	res, err := s.d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Network: network, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// fetchPy fetches URL through the proxy with urllib and prints
// "STATUS BODY" (an HTTP error's status and body, or the error).
const fetchPy = `
import os, ssl, sys, urllib.request, urllib.error
os.environ.pop("no_proxy", None); os.environ.pop("NO_PROXY", None)
# The host's roots (or, with secrets, the daemon's bundle) and the test
# servers' CA; always through the proxy, whatever no_proxy says.
ctx = ssl.create_default_context()
ctx.load_verify_locations("test-ca.pem")
proxy = "http://127.0.0.1:3128"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
                                     urllib.request.HTTPSHandler(context=ctx))
def fetch(url, headers={}):
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=20) as r:
            return "%d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode())
    except Exception as e:
        return "error %s: %s" % (type(e).__name__, e)
`

func allowNet(hosts ...string) *agentapi.Network { return &agentapi.Network{Allow: hosts} }

// TestEgress drives the egress proxy end to end: allowed hosts work,
// everything else is refused with a clear error, and every connection is
// in the run's audit.
func TestEgress(t *testing.T) {
	_, name := testRootfs(t)
	s := newEgressSetup(t, name)
	p, tp := s.plain.port, s.tls.port
	files := fmt.Sprintf("files.test:%d", p)

	t.Run("allowed host from urllib", func(t *testing.T) {
		before := s.plain.hit("/hello")
		res := s.run(t, fetchPy+fmt.Sprintf("print(fetch('http://files.test:%d/hello'))", p), allowNet(files))
		if res.Status != agentapi.StatusOK || strings.TrimSpace(res.Stdout) != "200 hello from upstream" {
			t.Fatalf("got %s %q %q", res.Status, res.Stdout, res.Stderr)
		}
		if got := s.plain.hit("/hello"); got != before+1 {
			t.Errorf("the upstream saw %d requests, want 1", got-before)
		}
		n := res.Network
		if n == nil || n.Connections != 1 || n.Refused != 0 || len(n.Records) != 1 {
			t.Fatalf("network report %+v", n)
		}
		r := n.Records[0]
		if r.Host != "files.test" || r.Port != p || !r.Allowed || r.Addr != fmt.Sprintf("127.0.0.1:%d", p) || r.Received < int64(len("hello from upstream")) || r.Sent == 0 {
			t.Errorf("record %+v", r)
		}
	})

	t.Run("npm tarballs are cached by their sha512 integrity", func(t *testing.T) {
		// What npm install does: the abbreviated metadata, then the
		// tarball; a second sandbox gets the tarball from the cache.
		code := fetchPy + fmt.Sprintf(`
accept = {"Accept": "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"}
print(fetch('http://files.test:%d/npm/demo', accept)[:3])
print(fetch('http://files.test:%d/npm/demo/-/demo-1.0.0.tgz'))`, p, p)
		for i := range 2 {
			res := s.run(t, code, allowNet(files))
			if res.Stdout != "200\n200 an npm tarball\n" {
				t.Fatalf("sandbox %d: %q %q", i+1, res.Stdout, res.Stderr)
			}
			if cached := res.Network.Records[len(res.Network.Records)-1].Cached; cached != (i == 1) {
				t.Errorf("sandbox %d: the tarball's record cached=%v", i+1, cached)
			}
		}
		if got := s.plain.hit("/npm/demo/-/demo-1.0.0.tgz"); got != 1 {
			t.Errorf("the registry served the tarball %d times, want 1", got)
		}
	})

	t.Run("HTTPS through CONNECT", func(t *testing.T) {
		res := s.run(t, fetchPy+fmt.Sprintf("print(fetch('https://other-tls.test:%d/hello'))", tp), allowNet(fmt.Sprintf("other-tls.test:%d", tp)))
		if strings.TrimSpace(res.Stdout) != "200 hello from upstream" {
			t.Fatalf("got %s %q %q", res.Status, res.Stdout, res.Stderr)
		}
		if r := res.Network.Records; len(r) != 1 || r[0].Method != "CONNECT" || !r[0].Allowed {
			t.Errorf("records %+v", r)
		}
	})

	refused := []struct {
		name, url, allow, reason string
	}{
		{"host not in the policy", fmt.Sprintf("http://other.test:%d/hello", p), files, "not allow"},
		{"name resolving to a loopback port nobody opened", fmt.Sprintf("http://rebind.test:%d/hello", s.closedPort), fmt.Sprintf("rebind.test:%d", s.closedPort), "127.0.0.1"},
		{"name resolving to the metadata address", "http://meta.test/latest/meta-data/", "meta.test", "169.254.169.254"},
		{"IP literal", fmt.Sprintf("http://127.0.0.1:%d/hello", p), files, "127.0.0.1"},
		{"port not allowed", fmt.Sprintf("http://files.test:%d/hello", s.closedPort), files, "not allow"},
		{"wildcard allows one label only", fmt.Sprintf("http://a.b.wild.test:%d/hello", p), fmt.Sprintf("*.wild.test:%d", p), "not allow"},
	}
	for _, c := range refused {
		t.Run("refused: "+c.name, func(t *testing.T) {
			before := s.plain.hit("/hello")
			// The fetch times itself inside the sandbox: a slow start of the
			// sandbox is not the refusal's time.
			res := s.run(t, fetchPy+fmt.Sprintf("import time\nt0 = time.monotonic()\nr = fetch(%q)\nprint(f'{time.monotonic() - t0:.3f}')\nprint(r)", c.url), allowNet(c.allow))
			took, out, _ := strings.Cut(strings.TrimSpace(res.Stdout), "\n")
			if !strings.HasPrefix(out, "403 nsbox egress") && !strings.HasPrefix(out, "502 nsbox egress") {
				t.Fatalf("want a 403 from the proxy naming the problem, got %q (stderr %q)", res.Stdout, res.Stderr)
			}
			if secs, err := strconv.ParseFloat(took, 64); err != nil || secs > 15 {
				t.Errorf("refusal took %s s (%v); it must be quick", took, err)
			}
			if s.plain.hit("/hello") != before {
				t.Errorf("the upstream was reached")
			}
			n := res.Network
			if n == nil || n.Refused != 1 || n.Connections != 0 || len(n.Records) != 1 || n.Records[0].Allowed {
				t.Fatalf("network report %+v", n)
			}
			if !strings.Contains(n.Records[0].Reason, c.reason) {
				t.Errorf("reason %q does not mention %q", n.Records[0].Reason, c.reason)
			}
		})
	}

	t.Run("refused: CONNECT whose SNI differs", func(t *testing.T) {
		// http.client would handshake with the tunnel's own host; do it by hand.
		code := fetchPy + fmt.Sprintf(`
import socket
raw = socket.create_connection(("127.0.0.1", 3128), timeout=20)
raw.sendall(b"CONNECT other-tls.test:%d HTTP/1.1\r\nHost: other-tls.test:%d\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += raw.recv(1)
print(head.split(b"\r\n")[0].decode())
try:
    s = ctx.wrap_socket(raw, server_hostname="tls.test")
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: tls.test\r\nConnection: close\r\n\r\n")
    print("fronted", s.recv(100))
except Exception as e:
    print("refused", type(e).__name__)
`, tp, tp)
		before := s.tls.hit("/hello")
		res := s.run(t, code, allowNet(fmt.Sprintf("other-tls.test:%d", tp), fmt.Sprintf("tls.test:%d", tp)))
		if !strings.Contains(res.Stdout, "refused") || strings.Contains(res.Stdout, "fronted") {
			t.Fatalf("domain fronting was not refused: %q %q", res.Stdout, res.Stderr)
		}
		if s.tls.hit("/hello") != before {
			t.Errorf("the upstream was reached")
		}
		if n := res.Network; n == nil || n.Refused != 1 || !strings.Contains(n.Records[0].Reason, "SNI") {
			t.Errorf("network report %+v", n)
		}
	})

	t.Run("no policy: no proxy, no network", func(t *testing.T) {
		code := fmt.Sprintf(`
import os, socket
print(sorted(k for k in os.environ if 'proxy' in k.lower()))
for port in (3128, %d):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5)
        print("connected", port)
    except OSError as e:
        print("refused", port)
print(sorted(n for _, n in socket.if_nameindex()))
`, p)
		res := s.run(t, code, nil)
		want := fmt.Sprintf("[]\nrefused 3128\nrefused %d\n['lo']", p)
		if strings.TrimSpace(res.Stdout) != want || res.Network != nil {
			t.Fatalf("got %q %+v, want %q", res.Stdout, res.Network, want)
		}
	})

	t.Run("networked sandbox has only lo and cannot connect directly", func(t *testing.T) {
		code := fmt.Sprintf(`
import os, socket
print(sorted(n for _, n in socket.if_nameindex()))
try:
    socket.create_connection(("127.0.0.1", %d), timeout=5)
    print("direct connect worked")
except OSError:
    print("direct refused")
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.53", 53))
    print("udp sent")
except OSError as e:
    print("udp", e.errno)
`, p)
		res := s.run(t, code, allowNet(files))
		if !strings.HasPrefix(res.Stdout, "['lo']\ndirect refused\n") {
			t.Fatalf("got %q %q", res.Stdout, res.Stderr)
		}
	})

	t.Run("GET /v1/info says what may be asked for", func(t *testing.T) {
		info, err := s.d.client.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := info.Network
		if n == nil || len(n.Allow) != 7 || n.Allow[0] != files || len(n.Secrets) != 1 || n.Secrets[0] != "NSBOX_TEST_TOKEN" || n.MaxConnections != 1000 {
			t.Fatalf("info network %+v", n)
		}
		raw, _ := json.Marshal(info)
		if strings.Contains(string(raw), s.secret) {
			t.Error("info holds the secret's value")
		}
	})

	t.Run("nsbox exec --allow-net", func(t *testing.T) {
		get := fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://files.test:%d/hello').read().decode())", p)
		out, err := execNsbox("exec", "--socket", s.d.sock, "--allow-net", files, "--", "python3", "-c", get).CombinedOutput()
		if err != nil || string(out) != "hello from upstream\n" {
			t.Fatalf("allowed: %v %q", err, out)
		}
		out, err = execNsbox("exec", "--socket", s.d.sock, "--allow-net", fmt.Sprintf("other.test:%d", p), "--", "python3", "-c", get).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "nsbox egress: files.test:") || !strings.Contains(string(out), "add it to network.allow") {
			t.Fatalf("refused: %v %q", err, out)
		}
		out, err = execNsbox("exec", "--socket", s.d.sock, "--allow-net", "evil.example", "--", "true").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "network.allow[0]") || !strings.Contains(string(out), "[network] allow") {
			t.Fatalf("outside the operator's list: %v %q", err, out)
		}
	})

	t.Run("isolation holds with a policy", func(t *testing.T) {
		// The proxy adds a listener to the sandbox's namespace and nothing
		// else: the rest of the isolation is the engine's, unchanged.
		code := `
import os, errno
for p in ["/usr/bin/python3", "/etc/passwd", "/newfile"]:
    try:
        open(p, "a").close(); print("wrote", p)
    except OSError as e:
        print(p, errno.errorcode[e.errno])
st = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print(os.getuid(), st["CapEff"], st["CapBnd"], st["NoNewPrivs"], st["Seccomp"])
`
		res := s.run(t, code, allowNet(files))
		// Every write refused: the rootfs is a read-only overlay (EROFS
		// before any permission check; on kernels before 6.15 a read-only
		// bind, where root's files refuse the sandbox user first, EACCES).
		want := "/usr/bin/python3 EROFS\n/etc/passwd EROFS\n/newfile EROFS\n1000 0000000000000000 0000000000000000 1 2\n"
		bind := strings.Replace(strings.Replace(want, "python3 EROFS", "python3 EACCES", 1), "passwd EROFS", "passwd EACCES", 1)
		if res.Stdout != want && res.Stdout != bind {
			t.Fatalf("got %q (stderr %q), want %q (or %q on a read-only bind)", res.Stdout, res.Stderr, want, bind)
		}
	})

	t.Run("a flood of idle connections to the proxy", func(t *testing.T) {
		// 1000 connections that send nothing: the daemon keeps at most a
		// bounded number open (the rest wait in the sandbox's own backlog),
		// another sandbox's egress is untouched, and the flood ends with
		// its run.
		flood := `
import socket
socks = []
for i in range(1000):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", 3128))
    except BlockingIOError:
        pass
    socks.append(s)
print(len(socks), flush=True)
import time; time.sleep(120)
`
		daemonFDs := func() int {
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.d.Cmd.Process.Pid))
			return len(fds)
		}
		before := daemonFDs()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		connected := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			_, err := s.d.client.RunStream(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: flood, Network: allowNet(files),
				Limits: &agentapi.Limits{Pids: 16}}, func(ev agentapi.Event) {
				if ev.Type == agentapi.EventStdout {
					select {
					case connected <- strings.TrimSpace(ev.Data):
					default:
					}
				}
			})
			done <- err
		}()
		select {
		case n := <-connected:
			if n != "1000" {
				t.Fatalf("the flood opened %q connections, want 1000", n)
			}
		case err := <-done:
			t.Fatalf("the flooding run ended before its connections were made: %v", err)
		}
		// The daemon takes connections until its cap: then the flood is on.
		for deadline := time.Now().Add(30 * time.Second); daemonFDs() < before+100; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon holds %d descriptors (%d before the flood): the flood's connections never reached it", daemonFDs(), before)
			}
		}
		res := s.run(t, fetchPy+fmt.Sprintf("print(fetch('http://files.test:%d/hello'))", p), allowNet(files))
		if strings.TrimSpace(res.Stdout) != "200 hello from upstream" {
			t.Errorf("another sandbox during the flood: %q %q", res.Stdout, res.Stderr)
		}
		if n := daemonFDs(); n > 400 {
			t.Errorf("the daemon holds %d descriptors during the flood (%d before it)", n, before)
		}
		cancel() // the flooding run ends; its connections go with it
		<-done
		for deadline := time.Now().Add(30 * time.Second); daemonFDs() > before+16; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon holds %d descriptors 30 s after the flooding run ended (%d before it)", daemonFDs(), before)
			}
		}
	})

	t.Run("caps end the run's connections", func(t *testing.T) {
		code := fetchPy + fmt.Sprintf("for i in range(3): print(fetch('http://files.test:%d/hello'))", p)
		res := s.run(t, code, &agentapi.Network{Allow: []string{files}, MaxConnections: 2})
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "200") || !strings.HasPrefix(lines[1], "200") || !strings.Contains(lines[2], "cap") {
			t.Fatalf("got %q", res.Stdout)
		}
		if res.Network.Capped == "" {
			t.Errorf("report does not say a cap was reached: %+v", res.Network)
		}
		code = fetchPy + fmt.Sprintf("print(fetch('http://files.test:%d/big?n=%d')[:20])", p, 4<<20)
		res = s.run(t, code, &agentapi.Network{Allow: []string{files}, MaxBytes: 1 << 20})
		if strings.HasPrefix(res.Stdout, "200 xxxx") || res.Network.Capped == "" {
			t.Fatalf("a 4 MiB download under a 1 MiB cap: %q, %+v", res.Stdout, res.Network)
		}
		if got := res.Network.BytesReceived; got > 2<<20 {
			t.Errorf("%d bytes reached the sandbox under a 1 MiB cap", got)
		}
	})

	t.Run("secret swapped for its host only", func(t *testing.T) {
		code := fetchPy + fmt.Sprintf(`
import os
tok = os.environ["NSBOX_TEST_TOKEN"]
print(tok.startswith("nsbox-secret-"))
print(fetch('https://tls.test:%d/auth', {"Authorization": "Bearer " + tok}))
print(fetch('https://other-tls.test:%d/auth', {"Authorization": "Bearer " + tok}))
print(fetch('http://files.test:%d/auth', {"Authorization": "Bearer " + tok}))
`, tp, tp, p)
		net := &agentapi.Network{Allow: []string{fmt.Sprintf("tls.test:%d", tp), fmt.Sprintf("other-tls.test:%d", tp), files}, Secrets: []string{"NSBOX_TEST_TOKEN"}}
		res := s.run(t, code, net)
		if strings.Contains(res.Stdout, s.secret) {
			t.Fatalf("the secret's value reached the sandbox: %q", res.Stdout)
		}
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if len(lines) != 4 || lines[0] != "True" || lines[1] != "200 ok" || lines[2] != "200 ok" || lines[3] != "200 ok" {
			t.Fatalf("got %q (stderr %q)", res.Stdout, res.Stderr)
		}
		// tls.test (bound to the secret) then other-tls.test (not) share
		// a server; files.test is plain HTTP.
		if got := s.tls.auth("/auth"); len(got) != 2 || got[0] != "Bearer "+s.secret || !placeholderRe.MatchString(got[1]) {
			t.Errorf("the TLS server saw %q, want the secret from tls.test then the placeholder from other-tls.test", got)
		}
		if got := s.plain.auth("/auth"); len(got) != 1 || !placeholderRe.MatchString(got[0]) {
			t.Errorf("files.test saw %q, want the placeholder", got)
		}
		var swapped bool
		for _, r := range res.Network.Records {
			swapped = swapped || len(r.Secrets) > 0 && r.Host == "tls.test"
		}
		if !swapped {
			t.Errorf("no record says the secret was used: %+v", res.Network.Records)
		}
	})

	t.Run("a reload rotates the secret", func(t *testing.T) {
		rotated := s.secret + "-rotated"
		if err := os.WriteFile(s.secretFile, []byte(rotated), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(s.secretFile, []byte(s.secret), 0o600)
		before := strings.Count(s.d.log.String(), "reload: configuration applied")
		s.d.Cmd.Process.Signal(syscall.SIGHUP)
		for deadline := time.Now().Add(time.Minute); strings.Count(s.d.log.String(), "reload: configuration applied") == before; {
			if time.Now().After(deadline) {
				t.Fatal("the daemon did not reload")
			}
			time.Sleep(20 * time.Millisecond)
		}
		code := fetchPy + fmt.Sprintf(`
import os
print(fetch('https://tls.test:%d/auth', {"Authorization": "Bearer " + os.environ["NSBOX_TEST_TOKEN"]}))`, tp)
		res := s.run(t, code, &agentapi.Network{Allow: []string{fmt.Sprintf("tls.test:%d", tp)}, Secrets: []string{"NSBOX_TEST_TOKEN"}})
		if strings.TrimSpace(res.Stdout) != "200 ok" {
			t.Fatalf("got %q %q", res.Stdout, res.Stderr)
		}
		if got := s.tls.auth("/auth"); got[len(got)-1] != "Bearer "+rotated {
			t.Errorf("after the reload the upstream saw %q, want the rotated value", got[len(got)-1])
		}
	})
}

// placeholderRe matches a secret's placeholder.
var placeholderRe = regexp.MustCompile(`^Bearer nsbox-secret-[0-9a-f]{32}$`)

// TestEgressPipAndSessions: pip installs from a local PEP 503 index
// through the proxy, the second install comes from the daemon's cache,
// a session's installs import in its next cell, and a session holding a
// secret has only its placeholder in memory, environment and workspace.
func TestEgressPipAndSessions(t *testing.T) {
	name, ok := dataSciAvailable(t)
	if !ok {
		t.Skipf("requires the data-science rootfs %q (with pip): make rootfs-default", name)
	}
	s := newEgressSetup(t, name)
	p, tp := s.plain.port, s.tls.port
	files := fmt.Sprintf("files.test:%d", p)
	pip := fmt.Sprintf("python3 -m pip install -q --index-url http://files.test:%d/simple/ --trusted-host files.test nsboxdemo", p)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("pip install, then again from the cache", func(t *testing.T) {
		for i := range 2 {
			res, err := s.d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguageBash,
				Code: pip + " && python3 -c 'import nsboxdemo; print(nsboxdemo.VALUE)'", Network: allowNet(files)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != agentapi.StatusOK || strings.TrimSpace(res.Stdout) != "42" {
				t.Fatalf("install %d: %s %q %q", i+1, res.Status, res.Stdout, res.Stderr)
			}
			var cached bool
			for _, r := range res.Network.Records {
				cached = cached || r.Cached
			}
			if cached != (i == 1) {
				t.Errorf("install %d: a record cached=%v; want the second install's wheel from the cache: %+v", i+1, cached, res.Network.Records)
			}
		}
		if got := s.plain.hit("/files/" + wheelName); got != 1 {
			t.Errorf("the index served the wheel %d times, want 1 (the second install from the cache)", got)
		}
		if got := s.plain.hit("/simple/nsboxdemo/"); got != 2 {
			t.Errorf("the index page was fetched %d times, want 2 (never cached)", got)
		}
	})

	t.Run("pip install over HTTPS, then again from the cache", func(t *testing.T) {
		// tls.test is a cache host: the proxy terminates its TLS (the
		// sandbox trusts the daemon's CA through PIP_CERT) and caches the
		// wheel its index page vouches for.
		pipTLS := fmt.Sprintf("python3 -m pip install -q --index-url https://tls.test:%d/https/simple/ nsboxdemo && python3 -c 'import nsboxdemo; print(nsboxdemo.VALUE)'", tp)
		tlsNet := allowNet(fmt.Sprintf("tls.test:%d", tp))
		for i := range 2 {
			res, err := s.d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguageBash, Code: pipTLS, Network: tlsNet})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != agentapi.StatusOK || strings.TrimSpace(res.Stdout) != "42" {
				t.Fatalf("install %d: %s %q %q", i+1, res.Status, res.Stdout, res.Stderr)
			}
		}
		if got := s.tls.hit("/https/files/" + wheelName); got != 1 {
			t.Errorf("the HTTPS index served the wheel %d times, want 1", got)
		}
	})

	t.Run("networked Python runs fork from the zygote", func(t *testing.T) {
		// The listener is made once the child is verified and before its
		// code runs: a networked run is no reason to start cold.
		forks := func() string { // the main and the lean zygote's
			return s.d.metricSum(t, fmt.Sprintf(`nsbox_zygote_forks_total{rootfs=%q,`, name))
		}
		before := forks()
		res := s.run(t, fetchPy+fmt.Sprintf("import pandas\nprint(fetch('http://files.test:%d/hello'))", p), allowNet(files))
		if strings.TrimSpace(res.Stdout) != "200 hello from upstream" {
			t.Fatalf("got %q %q", res.Stdout, res.Stderr)
		}
		if after := forks(); after == before {
			t.Errorf("zygote forks %s -> %s: the networked run did not fork from the zygote", before, after)
		}
		if fb := s.d.metricSum(t, fmt.Sprintf(`nsbox_zygote_fallbacks_total{rootfs=%q,`, name)); fb != "0" {
			t.Errorf("zygote fallbacks: %s", fb)
		}
	})

	t.Run("requests through the proxy", func(t *testing.T) {
		// requests reads HTTP(S)_PROXY like pip does; a refused host is a
		// ProxyError at once, with the proxy's reason.
		code := fmt.Sprintf(`
import requests
print(requests.get("http://files.test:%d/hello", timeout=20).text)
try:
    requests.get("https://other-tls.test:%d/hello", timeout=20)
except requests.exceptions.ProxyError as e:
    print("refused:", "nsbox egress" in str(e), "not allowed" in str(e))
`, p, tp)
		res, err := s.d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code, Network: allowNet(files)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "hello from upstream\nrefused: True True\n" {
			t.Fatalf("got %q (stderr %q)", res.Stdout, res.Stderr)
		}
	})

	t.Run("session: pip in one cell, import in the next", func(t *testing.T) {
		sess, err := s.d.client.CreateSession(ctx, &agentapi.SessionRequest{Network: allowNet(files)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.d.client.DeleteSession(context.Background(), sess.ID)
		if sess.Network == nil || len(sess.Network.Allow) != 1 {
			t.Errorf("the session does not describe its network: %+v", sess.Network)
		}
		res, err := s.d.client.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: fmt.Sprintf("import subprocess\nsubprocess.run(%q, shell=True, check=True)", pip)})
		if err != nil || res.Status != agentapi.StatusOK {
			t.Fatalf("pip cell: %v %+v", err, res)
		}
		if res.Network == nil || len(res.Network.Records) == 0 {
			t.Errorf("the pip cell's result has no network records: %+v", res.Network)
		}
		res, err = s.d.client.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "import nsboxdemo; nsboxdemo.VALUE"})
		if err != nil || res.Value != "42" {
			t.Fatalf("import cell: %v %+v", err, res)
		}
		if res.Network == nil || len(res.Network.Records) != 0 {
			t.Errorf("a cell without connections reports %+v", res.Network)
		}
	})

	t.Run("session with a secret holds only its placeholder", func(t *testing.T) {
		sess, err := s.d.client.CreateSession(ctx, &agentapi.SessionRequest{
			Network: &agentapi.Network{Allow: []string{fmt.Sprintf("tls.test:%d", tp)}, Secrets: []string{"NSBOX_TEST_TOKEN"}},
			Files:   []agentapi.File{{Path: "test-ca.pem", Text: string(s.caPEM)}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.d.client.DeleteSession(context.Background(), sess.ID)
		res, err := s.d.client.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: fetchPy + fmt.Sprintf(`
import os
kept = os.environ["NSBOX_TEST_TOKEN"] * 3  # copies in the heap
open("token-copy.txt", "w").write(kept)
fetch('https://tls.test:%d/auth', {"Authorization": "Bearer " + os.environ["NSBOX_TEST_TOKEN"]})`, tp)})
		if err != nil || res.Status != agentapi.StatusOK || !strings.Contains(res.Value, "200 ok") {
			t.Fatalf("cell: %v %+v", err, res)
		}
		if got := s.tls.auth("/auth"); len(got) == 0 || got[len(got)-1] != "Bearer "+s.secret {
			t.Fatalf("the upstream saw %q, want the secret", got)
		}
		// Scan every process of every sandbox of this daemon: environment
		// and all readable memory, and the session's workspace.
		var scanned, placeholders int
		for _, cg := range s.d.leftoverCgroups(t) {
			procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			for _, pid := range strings.Fields(string(procs)) {
				scanned++
				if env, _ := os.ReadFile("/proc/" + pid + "/environ"); bytes.Contains(env, []byte(s.secret)) {
					t.Errorf("pid %s has the secret in its environment", pid)
				}
				mem := readMemory(t, pid)
				if bytes.Contains(mem, []byte(s.secret)) {
					t.Errorf("pid %s has the secret's value in its memory", pid)
				}
				placeholders += bytes.Count(mem, []byte("nsbox-secret-"))
			}
		}
		// The session's interpreter holds the placeholder (three copies and
		// more): a scan that finds none reads nothing.
		if scanned == 0 || placeholders < 3 {
			t.Fatalf("scanned %d processes and found the placeholder %d times", scanned, placeholders)
		}
		list, err := s.d.client.ListFiles(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range list {
			b, err := s.d.client.GetFile(ctx, sess.ID, f.Path)
			if err == nil && bytes.Contains(b, []byte(s.secret)) {
				t.Errorf("workspace file %s holds the secret", f.Path)
			}
		}
	})
}

// readMemory reads every readable private or anonymous mapping of pid.
func readMemory(t *testing.T, pid string) []byte {
	t.Helper()
	maps, err := os.ReadFile("/proc/" + pid + "/maps")
	if err != nil {
		return nil
	}
	mem, err := os.Open("/proc/" + pid + "/mem")
	if err != nil {
		return nil
	}
	defer mem.Close()
	var out []byte
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' || (len(f) >= 6 && strings.HasPrefix(f[5], "/usr")) {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		if b-a > 1<<30 {
			continue
		}
		buf := make([]byte, b-a)
		n, _ := mem.ReadAt(buf, int64(a))
		out = append(out, buf[:n]...)
	}
	return out
}

// TestEgressRefusedWithoutConfig: a daemon whose [network] allows nothing
// refuses any network with a 400 that says how to configure it, and the
// run never starts.
func TestEgressRefusedWithoutConfig(t *testing.T) {
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Network: allowNet("pypi.org")})
	if !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "[network]") {
		t.Fatalf("got %v, want a 400 naming [network]", err)
	}
	_, err = d.client.CreateSession(ctx, &agentapi.SessionRequest{Network: allowNet("pypi.org")})
	if !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("session: got %v, want a 400", err)
	}
	if info, err := d.client.Info(ctx); err != nil || info.Network != nil {
		t.Errorf("info network %+v %v, want none", info.Network, err)
	}
	if got := d.metric(t, "nsbox_runs_total"); strings.Contains(got, `status="ok"`) {
		t.Errorf("a run started: %s", got)
	}
}
