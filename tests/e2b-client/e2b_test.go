// Package e2bclient drives nsbox's E2B-compatible endpoint with the
// official, unmodified E2B JavaScript SDKs (e2b, @e2b/code-interpreter,
// pinned in package-lock.json): it starts a private daemon with
// --e2b-listen, --e2b-keys and a [network] config that lets sandboxes
// reach one test server on 127.0.0.1, runs the node:test scripts here against it
// with nothing but E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, and then
// checks that nothing is left: no session, cgroup, mount or process. It
// needs root, node, `make deps` (node_modules) and the minimal and
// data-science rootfs.
package e2bclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// TestE2BClient runs every *.test.mjs here (sandbox lifecycle, commands,
// files, runCode and contexts, auth and isolation) against a private
// daemon whose default rootfs is the data-science one. NSBOX_E2B_TEST_NAME
// narrows the run to the node tests whose names match it (node's
// --test-name-pattern).
func TestE2BClient(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a real daemon and sandboxes; not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon runs sandboxes")
	}
	node, dir := nodeClient(t)
	_, minimal := testdaemon.Rootfs(t)
	datasci := testdaemon.DataSciRootfs(t)

	bin, err := testdaemon.Build(filepath.Join("..", ".."), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, other, keys := keyFile(t)
	addr := freeLoopback(t)
	egress := egressUpstream(t)
	d := testdaemon.New(t, bin, "nsbox-e2b-", "--log-level", "debug", "--default-rootfs", datasci,
		"--e2b-listen", addr, "--e2b-keys", keys, "--config", egressConfig(t, egress))
	d.Start(t)
	t.Logf("daemon on %s (minimal rootfs %s, default %s), E2B endpoint http://%s", d.Sock, minimal, datasci, addr)
	d.Settle(t)
	base := takeLeftovers(t, d)

	scripts, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no *.test.mjs in %s: %v", dir, err)
	}
	args := []string{"--test", "--test-concurrency=1", "--test-reporter=spec"}
	if p := os.Getenv("NSBOX_E2B_TEST_NAME"); p != "" {
		args = append(args, "--test-name-pattern="+p)
	}
	for _, s := range scripts {
		args = append(args, filepath.Base(s))
	}
	// A file on the host that no sandbox may read (isolation.test.mjs).
	canary := filepath.Join(t.TempDir(), "host-canary")
	if err := os.WriteFile(canary, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(withoutE2B(os.Environ()),
		"E2B_API_URL=http://"+addr,
		"E2B_SANDBOX_URL=http://"+addr,
		"E2B_API_KEY="+key,
		"NSBOX_E2B_OTHER_KEY="+other,
		"NSBOX_E2B_TEMPLATE_DATASCI="+datasci,
		"NSBOX_E2B_HOST_CANARY="+canary,
		"NSBOX_E2B_EGRESS="+egress,
		"NSBOX_E2B_TEMPLATE_POLYGLOT="+testdaemon.PolyglotRootfs(t),
		"NO_COLOR=1",
	)
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	out.flush()
	if err != nil {
		t.Errorf("node --test: %v", err)
	}

	t.Run("a flood of idle connections", func(t *testing.T) { connectionFlood(t, d, addr, key) })

	// Every sandbox was killed by its test or ended at its timeout: no
	// session, and no more cgroups, mounts or processes than before.
	waitNoSessions(t, d)
	d.Settle(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := takeLeftovers(t, d)
		if now.cgroups <= base.cgroups && now.mounts <= base.mounts && now.procs <= base.procs {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("left behind by the E2B sandboxes: before %+v, after %+v; cgroups %q, mounts %q",
				base, now, testdaemon.LeftoverCgroups(t, d.CgroupName), testdaemon.Mounts(t, d.RunDir))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// And once the daemon stops, nothing of it is left at all.
	procs := testdaemon.Descendants(d.Pid())
	if err := d.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("daemon exit: %v", err)
	}
	if c := testdaemon.LeftoverCgroups(t, d.CgroupName); len(c) > 0 {
		t.Errorf("cgroups left after the daemon exited: %q", c)
	}
	if m := testdaemon.Mounts(t, d.RunDir); len(m) > 0 {
		t.Errorf("mounts left under %s: %q", d.RunDir, m)
	}
	for _, p := range procs {
		if p.Alive() {
			t.Errorf("process %d outlived the daemon", p.Pid)
		}
	}
}

// nodeClient returns node's path and this directory, skipping when node
// or the SDKs (node_modules, from `make deps`) are missing.
func nodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("requires node for the E2B JavaScript SDKs (apt-get install nodejs npm): %v", err)
	}
	dir, err = filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"e2b", "@e2b/code-interpreter"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			t.Skipf("requires the E2B SDKs in %s/node_modules (make deps, or npm ci there): %v", dir, err)
		}
	}
	return node, dir
}

// keyFile writes a root-only key file with two keys of the form the SDK
// accepts: the tests' own, and another whose caller must not reach the
// first one's sandboxes (NSBOX_E2B_OTHER_KEY).
func keyFile(t *testing.T) (key, other, path string) {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	key, other = "e2b_"+hex.EncodeToString(b[:16]), "e2b_"+hex.EncodeToString(b[16:])
	path = filepath.Join(t.TempDir(), "e2b-keys")
	if err := os.WriteFile(path, []byte("# nsbox e2b client test\n"+key+"\n"+other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return key, other, path
}

// egressUpstream serves /hello ("hello from upstream") on 127.0.0.1 and
// returns the name:port the sandboxes reach it by (egressConfig's).
func egressUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hello" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "hello from upstream")
	}))
	t.Cleanup(srv.Close)
	return fmt.Sprintf("egress.test:%d", srv.Listener.Addr().(*net.TCPAddr).Port)
}

// egressConfig writes the daemon's config: [network] allows egress, a
// name the daemon resolves to 127.0.0.1 (network.test.mjs).
func egressConfig(t *testing.T, egress string) string {
	t.Helper()
	_, port, _ := strings.Cut(egress, ":")
	conf := fmt.Sprintf("[network]\nallow = [%q]\nopen = [\"127.0.0.1:%s\"]\n\n[network.hosts]\n\"egress.test\" = \"127.0.0.1\"\n", egress, port)
	p := filepath.Join(t.TempDir(), "nsbox.toml")
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// freeLoopback returns a 127.0.0.1 address with a port nobody listens on
// (a moment ago).
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// withoutE2B drops the E2B_ variables of the caller's environment: the
// scripts must see only this daemon (and never E2B_DEBUG).
func withoutE2B(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "E2B_") {
			out = append(out, kv)
		}
	}
	return out
}

type leftovers struct{ cgroups, mounts, procs int }

func takeLeftovers(t *testing.T, d *testdaemon.Daemon) leftovers {
	t.Helper()
	return leftovers{
		cgroups: len(testdaemon.LeftoverCgroups(t, d.CgroupName)),
		mounts:  len(testdaemon.Mounts(t, d.RunDir)),
		procs:   len(testdaemon.Descendants(d.Pid())),
	}
}

// waitNoSessions polls until the daemon has no live session.
func waitNoSessions(t *testing.T, d *testdaemon.Daemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := d.Client.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("sessions still live after the node tests: %+v", ss)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lineLogger writes node's output into the test log line by line, as it
// comes.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf.Next(i + 1)[:i]))
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 0 {
		l.t.Log(l.buf.String())
		l.buf.Reset()
	}
}

// connectionFlood opens more idle TCP connections to the E2B port than
// the endpoint holds (1024): anyone on the host can, key or not. The
// daemon's descriptors stay bounded, the Unix socket API answers
// throughout, and once the flood ends an E2B client is served again.
func connectionFlood(t *testing.T, d *testdaemon.Daemon, addr, key string) {
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 1500; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Logf("dial %d: %v", i, err)
			break
		}
		conns = append(conns, c)
	}
	if len(conns) < 1100 {
		t.Fatalf("only %d connections opened: the flood did not pass the cap", len(conns))
	}
	time.Sleep(time.Second)
	during := fds()
	t.Logf("daemon fds: %d before, %d with %d idle connections open", before, during, len(conns))
	if during > before+1024+32 {
		t.Errorf("daemon fds %d with %d connections (before %d): the connection cap does not hold", during, len(conns), before)
	}
	if _, err := d.Client.Info(context.Background()); err != nil {
		t.Errorf("the Unix socket API during the flood: %v", err)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v2/sandboxes", nil)
		req.Header.Set("X-API-KEY", key)
		res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the E2B endpoint after the flood: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
