package container

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// The isolation suite's escape probes, in JavaScript: what a Node.js
// process can try (fs, child_process, Buffers, process.stdout) is held by
// the same namespaces, filter and limits as Python, with the same verdicts.
// Each probe is node -e CODE through the engine on a rootfs with node
// (testenv.NodeRootfs): no runner involved.
func TestNodeIsolation(t *testing.T) {
	root := testenv.NodeRootfs(t)
	e := newTestEngine(t)
	for _, tc := range []namedTest{
		{"RunPrint", func(t *testing.T) { nodeRunPrint(t, e, root) }},
		{"HostCanaryUnreadable", func(t *testing.T) { nodeHostCanaryUnreadable(t, e, root) }},
		{"RootfsIsReadOnly", func(t *testing.T) { nodeRootfsIsReadOnly(t, e, root) }},
		{"CredentialsAndCapabilities", func(t *testing.T) { nodeCredentialsAndCapabilities(t, e, root) }},
		{"NetworkIsLoopbackOnly", func(t *testing.T) { nodeNetworkIsLoopbackOnly(t, e, root) }},
		{"NamespacesRefused", func(t *testing.T) { nodeNamespacesRefused(t, e, root) }},
		{"ForkBombContained", func(t *testing.T) { nodeForkBombContained(t, e, root) }},
		{"MemoryBombBuffers", func(t *testing.T) { nodeMemoryBomb(t, e, root, bufferBomb) }},
		{"MemoryBombHeap", func(t *testing.T) { nodeMemoryBomb(t, e, root, heapBomb) }},
		{"OutputFloodStopsAtCap", func(t *testing.T) { nodeOutputFloodStopsAtCap(t, e, root) }},
		{"BackgroundProcessDiesWithRun", func(t *testing.T) { nodeBackgroundProcessDiesWithRun(t, e, root) }},
		{"TimeoutKillsWholeTree", func(t *testing.T) { nodeTimeoutKillsWholeTree(t, e, root) }},
		{"CleanEnvironment", func(t *testing.T) { nodeCleanEnvironment(t, e, root) }},
		{"StartsUnderDefaultLimits", func(t *testing.T) { nodeStartsUnderDefaultLimits(t, e, root) }},
		{"HeapFollowsMemoryLimit", func(t *testing.T) { nodeHeapFollowsMemoryLimit(t, e, root) }},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// runNode runs node -e code on root with optional spec tweaks.
func runNode(t *testing.T, e *Engine, root, code string, tweak ...func(*Spec)) *Result {
	t.Helper()
	return runSpec(t, e, Spec{RootfsDir: root, Argv: []string{"node", "-e", code}}, tweak...)
}

func nodeRunPrint(t *testing.T, e *Engine, root string) {
	if got := mustOK(t, runNode(t, e, root, "console.log(6 * 7)")); got != "42" {
		t.Fatalf("stdout = %q, want 42", got)
	}
}

func nodeHostCanaryUnreadable(t *testing.T, e *Engine, root string) {
	canary := filepath.Join(t.TempDir(), "host-canary-"+NewID())
	if err := os.WriteFile(canary, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`
const fs = require("fs");
console.log("pids", JSON.stringify(fs.readdirSync("/proc").filter(p => /^\d+$/.test(p)).map(Number)));
for (const p of [%q, "/proc/1/root" + %q, "/proc/%d/root/etc/hostname"]) {
  try { fs.readFileSync(p); console.log("READ", p); } catch (e) { console.log("denied", e.code); }
}
console.log("hostname", fs.readFileSync("/proc/sys/kernel/hostname", "utf8").trim());
`, canary, canary, os.Getpid())
	out := mustOK(t, runNode(t, e, root, code))
	if strings.Contains(out, "READ") {
		t.Fatalf("host file reachable from the sandbox:\n%s", out)
	}
	if strings.Count(out, "denied ") != 3 {
		t.Errorf("want three denied reads:\n%s", out)
	}
	if !strings.Contains(out, "pids [1]") {
		t.Errorf("sandbox sees processes other than its own:\n%s", out)
	}
	if !strings.Contains(out, "hostname sandbox") {
		t.Errorf("hostname not isolated:\n%s", out)
	}
}

func nodeRootfsIsReadOnly(t *testing.T, e *Engine, root string) {
	code := `
const fs = require("fs");
for (const p of ["/usr/bin/node", "/etc/passwd", "/newfile", "/usr/x"]) {
  try { fs.writeFileSync(p, "x", {flag: "a"}); console.log(p, "WRITABLE"); } catch (e) { console.log(p, e.code); }
}
`
	out := mustOK(t, runNode(t, e, root, code))
	if strings.Contains(out, "WRITABLE") {
		t.Fatalf("rootfs writable from the sandbox:\n%s", out)
	}
	if !strings.Contains(out, "/usr/x EROFS") {
		t.Errorf("writing /usr/x: want EROFS:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasSuffix(line, "EROFS") && !strings.HasSuffix(line, "EACCES") {
			t.Errorf("unexpected outcome %q", line)
		}
	}
}

func nodeCredentialsAndCapabilities(t *testing.T, e *Engine, root string) {
	code := `
const fs = require("fs"), tty = require("tty");
console.log(process.getuid(), process.geteuid(), process.getgid(), JSON.stringify(process.getgroups()));
const st = Object.fromEntries(fs.readFileSync("/proc/self/status", "utf8").split("\n")
  .filter(l => l.includes(":\t")).map(l => l.split(":\t").map(s => s.trim())));
for (const k of ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]) console.log(k, st[k]);
console.log("Groups", JSON.stringify(st.Groups));
console.log("tty", fs.existsSync("/dev/tty"), tty.isatty(0));
`
	out := mustOK(t, runNode(t, e, root, code))
	for _, w := range []string{
		// Node's getgroups always includes the egid; the kernel's list of
		// supplementary groups is empty.
		"1000 1000 1000 [1000]", `Groups ""`,
		"CapInh 0000000000000000", "CapPrm 0000000000000000", "CapEff 0000000000000000",
		"CapBnd 0000000000000000", "CapAmb 0000000000000000",
		"NoNewPrivs 1", "Seccomp 2", "tty false false",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
}

func nodeNetworkIsLoopbackOnly(t *testing.T, e *Engine, root string) {
	code := `
const fs = require("fs"), net = require("net");
const ifs = fs.readFileSync("/proc/net/dev", "utf8").split("\n").slice(2).filter(l => l.trim()).map(l => l.split(":")[0].trim());
console.log("ifs", ifs.sort().join(","));
const srv = net.createServer(c => { c.on("data", d => { console.log("lo", d.toString()); c.end(); srv.close(); outside(); }); });
srv.listen(0, "127.0.0.1", () => { net.connect(srv.address().port, "127.0.0.1", function () { this.end("ping"); }); });
function outside() {
  const c = net.connect({host: "1.1.1.1", port: 53, timeout: 2000});
  c.on("connect", () => { console.log("outside reachable"); c.destroy(); });
  c.on("timeout", () => { console.log("outside timeout"); c.destroy(); });
  c.on("error", e => console.log("outside", e.code));
}
`
	out := mustOK(t, runNode(t, e, root, code))
	for _, w := range []string{"ifs lo\n", "lo ping\n", "outside "} {
		if !strings.Contains(out+"\n", w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
	if strings.Contains(out, "outside reachable") {
		t.Errorf("the outside is reachable:\n%s", out)
	}
}

// Node has no raw syscall(2) (process.binding exposes node's internals, not
// the kernel's): what a Node program can reach is another program through
// child_process. unshare(1) asking for a user namespace is refused by the
// seccomp filter alone where the host lets unprivileged users make one
// (TestDangerousSyscallsRefused checks the errno is the filter's), the
// others by the filter and the missing capabilities.
func nodeNamespacesRefused(t *testing.T, e *Engine, root string) {
	code := `
const {spawnSync} = require("child_process");
for (const args of [["-U"], ["-Ur"], ["-Un"], ["-m"], ["-p", "-f"]]) {
  const r = spawnSync("unshare", [...args, "true"], {encoding: "utf8"});
  console.log(args.join(""), r.status, (r.stderr || "").trim().split("\n").pop());
}
`
	out := mustOK(t, runNode(t, e, root, code))
	lines := strings.Split(out, "\n")
	if len(lines) != 5 {
		t.Fatalf("want five outcomes:\n%s", out)
	}
	for _, l := range lines {
		if strings.Contains(l, " 0 ") || !strings.Contains(l, "Operation not permitted") {
			t.Errorf("unshare %s: want a failure with EPERM", l)
		}
	}
}

func nodeForkBombContained(t *testing.T, e *Engine, root string) {
	marker := "nsbox-node-fork-marker-" + NewID()
	code := fmt.Sprintf(`
const {spawn} = require("child_process");
let n = 0;
for (; n < 1000; n++) {
  const c = spawn("sleep", ["30"], {stdio: "ignore", argv0: %q});
  if (c.pid === undefined) {
    c.on("error", e => { console.log("stopped", n, e.code); process.exit(0); });
    break;
  }
}
if (n === 1000) console.log("not stopped");
`, marker)
	res := runNode(t, e, root, code, func(s *Spec) { s.Limits.Pids = 16 })
	out := mustOK(t, res)
	var n int
	var code2 string
	if _, err := fmt.Sscanf(out, "stopped %d %s", &n, &code2); err != nil {
		t.Fatalf("fork bomb was not stopped: %q", out)
	}
	t.Log(out)
	if n >= 16 {
		t.Errorf("spawned %d children under a pids limit of 16", n)
	}
	if code2 != "EAGAIN" {
		t.Errorf("spawn failed with %s, want EAGAIN (the pids limit)", code2)
	}
	assertNoProcess(t, marker)
}

const (
	// bufferBomb grows memory outside V8's heap (Buffers' backing stores),
	// touching every page.
	bufferBomb = "const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1));"
	// heapBomb grows V8's own heap with arrays of numbers.
	heapBomb = "const a = []; for (;;) a.push(new Array(1 << 20).fill(1.5));"
)

func nodeMemoryBomb(t *testing.T, e *Engine, root, code string) {
	const limit = 128 << 20 // node alone takes ~40 MiB
	res := runNode(t, e, root, code, func(s *Spec) { s.Limits.MemoryBytes = limit })
	if res.Status != StatusOOM {
		t.Fatalf("memory bomb: status %s (exit %d, signal %q), want oom; stderr %s", res.Status, res.ExitCode, res.Signal, res.Stderr)
	}
	t.Logf("peak %d MiB, stderr %q", res.MemoryPeakBytes>>20, res.Stderr)
	if res.MemoryPeakBytes < limit/2 || res.MemoryPeakBytes > limit+16<<20 {
		t.Errorf("peak memory %d MiB, want near the %d MiB limit", res.MemoryPeakBytes>>20, limit>>20)
	}
}

func nodeOutputFloodStopsAtCap(t *testing.T, e *Engine, root string) {
	res := runNode(t, e, root, "const b = Buffer.alloc(1 << 20, 120); for (let i = 0; i < 1024; i++) process.stdout.write(b);",
		func(s *Spec) { s.Limits.OutputBytes = 1 << 20 })
	if res.Status != StatusOutputLimit || !res.StdoutTruncated {
		t.Fatalf("status %s truncated %v, want output_limit", res.Status, res.StdoutTruncated)
	}
	if len(res.Stdout) != 1<<20 {
		t.Errorf("kept %d bytes, want exactly the 1 MiB cap", len(res.Stdout))
	}
}

func nodeBackgroundProcessDiesWithRun(t *testing.T, e *Engine, root string) {
	marker := "nsbox-node-bg-marker-" + NewID()
	code := fmt.Sprintf(`
require("child_process").spawn("sleep", ["1000"], {detached: true, stdio: "ignore", argv0: %q}).unref();
console.log("started");
`, marker)
	if got := mustOK(t, runNode(t, e, root, code)); got != "started" {
		t.Fatalf("stdout %q", got)
	}
	assertNoProcess(t, marker)
}

func nodeTimeoutKillsWholeTree(t *testing.T, e *Engine, root string) {
	marker := "nsbox-node-timeout-marker-" + NewID()
	code := fmt.Sprintf(`require("child_process").spawn("sleep", ["1000"], {detached: true, stdio: "ignore", argv0: %q}); for (;;) {}`, marker)
	res := runNode(t, e, root, code, func(s *Spec) { s.Limits.Timeout = time.Second })
	if res.Status != StatusTimeout {
		t.Fatalf("status %s, want timeout", res.Status)
	}
	if res.WallTime > 10*time.Second {
		t.Errorf("timeout of 1s took %v to end the run", res.WallTime)
	}
	assertNoProcess(t, marker)
}

func nodeCleanEnvironment(t *testing.T, e *Engine, root string) {
	t.Setenv("NSBOX_HOST_SECRET", "leak")
	out := mustOK(t, runNode(t, e, root, "console.log(JSON.stringify(process.env))"))
	if strings.Contains(out, "NSBOX_HOST_SECRET") || strings.Contains(out, "_NSBOX_INIT") {
		t.Errorf("host environment leaked:\n%s", out)
	}
	for _, w := range []string{`"HOME":"/workspace"`, `"NODE_OPTIONS":"--max-old-space-size=512"`} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %s in:\n%s", w, out)
		}
	}
}

// Node starts 7 threads (main, 4 V8 workers, libuv's and the inspector's),
// 11 once libuv's pool of 4 has run something, one more per worker thread:
// all far under the default 64 pids, and the default memory holds it.
func nodeStartsUnderDefaultLimits(t *testing.T, e *Engine, root string) {
	code := `
const fs = require("fs"), crypto = require("crypto"), {Worker} = require("worker_threads");
const threads = () => Number(fs.readFileSync("/proc/self/status", "utf8").match(/Threads:\t(\d+)/)[1]);
fs.readFile("/etc/hostname", () => crypto.pbkdf2("a", "b", 1000, 32, "sha256", () => {
  const w = new Worker("require('worker_threads').parentPort.postMessage(6 * 7)", {eval: true});
  w.on("message", m => { console.log("threads", threads(), "answer", m); w.terminate(); });
}));
`
	res := runNode(t, e, root, code)
	out := mustOK(t, res)
	var n, answer int
	if _, err := fmt.Sscanf(out, "threads %d answer %d", &n, &answer); err != nil || answer != 42 {
		t.Fatalf("stdout %q", out)
	}
	t.Logf("%d threads with libuv's pool and a worker, peak memory %d MiB", n, res.MemoryPeakBytes>>20)
	if lim := DefaultLimits().Pids; int64(n) > lim/2 {
		t.Errorf("node runs %d threads, more than half the default %d pids", n, lim)
	}
}

// V8's heap limit is the run's memory limit (runenv.Build): a program that
// churns through garbage with little live data fits in a limit that a V8
// sized from the host's RAM overruns.
func nodeHeapFollowsMemoryLimit(t *testing.T, e *Engine, root string) {
	const limit = 96 << 20
	code := `
const limit = require("v8").getHeapStatistics().heap_size_limit;
let keep = [];
for (let i = 0; i < 4000; i++) { keep.push(new Array(1 << 16).fill(i)); if (keep.length > 20) keep.shift(); }
console.log("heap_limit_mib", Math.floor(limit / 2 ** 20));
`
	res := runNode(t, e, root, code, func(s *Spec) { s.Limits.MemoryBytes = limit })
	out := mustOK(t, res)
	var mib int64
	if _, err := fmt.Sscanf(out, "heap_limit_mib %d", &mib); err != nil {
		t.Fatalf("stdout %q", out)
	}
	// heap_size_limit is the old space plus the young generation's share.
	if mib < limit>>20 || mib > limit>>20+64 {
		t.Errorf("V8 heap limit %d MiB under a %d MiB memory limit", mib, limit>>20)
	}
}
