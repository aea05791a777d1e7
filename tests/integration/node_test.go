package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// TestNodeRunsAndSessions: JavaScript and TypeScript through the daemon,
// on the data-science rootfs (which has Node.js and esbuild): one-shot
// runs with the same verdicts as Python's (value, exception with the
// user's line, timeout, OOM, output cap), sessions whose variables and
// top-level await persist and that outlive an exception and a timeout,
// runs taken from the warm Node pool, and a 400 that names what a rootfs
// without Node has.
func TestNodeRunsAndSessions(t *testing.T) {
	_, minimal := testRootfs(t)
	ds := dataSciRootfs(t)
	d := startDaemon(t, "--default-rootfs", ds, "--pool-node-size", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(lang, code string, lim *agentapi.Limits) *agentapi.RunResult {
		t.Helper()
		res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: lang, Code: code, Limits: lim})
		if err != nil {
			t.Fatalf("%s %q: %v", lang, code, err)
		}
		return res
	}

	t.Run("info lists the languages per rootfs", func(t *testing.T) {
		info, err := d.client.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Languages[ds]; !slices.Contains(got, "javascript") || !slices.Contains(got, "typescript") {
			t.Errorf("languages[%s] = %v", ds, got)
		}
		if got := info.Languages[minimal]; slices.Contains(got, "javascript") {
			t.Errorf("languages[%s] = %v: minimal has no node", minimal, got)
		}
		i := slices.IndexFunc(info.Pools, func(p agentapi.PoolInfo) bool { return p.Name == "node" })
		if i < 0 || info.Pools[i].Language != "javascript" {
			t.Errorf("pools %+v: want the node pool", info.Pools)
		}
	})
	t.Run("a one-shot run", func(t *testing.T) {
		res := run("javascript", "console.log(6 * 7)\nconst o = {a: [1, 2]}\no", nil)
		if res.Status != agentapi.StatusOK || res.Stdout != "42\n" || res.Value != "{ a: [ 1, 2 ] }" {
			t.Fatalf("%+v", res)
		}
		res = run("typescript", "const n: number = 41\nfunction inc(x: number): number { return x + 1 }\ninc(n)", nil)
		if res.Status != agentapi.StatusOK || res.Value != "42" {
			t.Fatalf("typescript: %+v", res)
		}
		res = run("javascript", "const r = await new Promise(ok => setTimeout(() => ok('late'), 50))\nr", nil)
		if res.Status != agentapi.StatusOK || res.Value != "'late'" {
			t.Fatalf("top-level await: %+v", res)
		}
	})
	t.Run("an exception points at the user's line", func(t *testing.T) {
		res := run("javascript", "function f() {\n  throw new TypeError('boom')\n}\nf()", nil)
		if res.Status != agentapi.StatusException || res.Exception == nil || res.Exception.Name != "TypeError" || res.Exception.Value != "boom" {
			t.Fatalf("%+v", res)
		}
		if !strings.Contains(res.Exception.Traceback, "<cell 1>:2:") || strings.Contains(res.Exception.Traceback, "runner") {
			t.Errorf("traceback %q: want the user's line 2, no runner frame", res.Exception.Traceback)
		}
		res = run("typescript", "let x: number = 1\nlet y = (x +\n", nil)
		if res.Status != agentapi.StatusException || res.Exception == nil || res.Exception.Name != "SyntaxError" {
			t.Fatalf("a TypeScript syntax error: %+v", res)
		}
		if res := run("typescript", "let s: string = 42 as any\ns", nil); res.Status != agentapi.StatusOK {
			t.Errorf("types are stripped, not checked: %+v", res)
		}
	})
	t.Run("limits and verdicts", func(t *testing.T) {
		if res := run("javascript", "while (true) {}", &agentapi.Limits{TimeoutMs: 1000}); res.Status != agentapi.StatusTimeout {
			t.Errorf("a loop under 1 s: %s %s", res.Status, res.Error)
		}
		if res := run("javascript", "const a = []\nwhile (true) a.push(Buffer.alloc(1 << 20, 1))", &agentapi.Limits{MemoryBytes: 192 << 20, TimeoutMs: 30_000}); res.Status != agentapi.StatusOOM {
			t.Errorf("a memory bomb under 192 MiB: %s %s", res.Status, res.Error)
		}
		res := run("javascript", "while (true) console.log('x'.repeat(1000))", &agentapi.Limits{OutputBytes: 64 << 10, TimeoutMs: 30_000})
		if res.Status != agentapi.StatusOutputLimit || !res.StdoutTruncated || int64(len(res.Stdout)) > 64<<10 {
			t.Errorf("an output flood under 64 KiB: %s, %d bytes", res.Status, len(res.Stdout))
		}
		res = run("javascript", "require('fs').writeFileSync('/usr/nsbox-x', 'x')", nil)
		if res.Status != agentapi.StatusException || !strings.Contains(res.Exception.Value, "EROFS") {
			t.Errorf("writing the rootfs: %+v", res.Exception)
		}
	})
	t.Run("runs come from the warm Node pool", func(t *testing.T) {
		d.Settle(t)
		if res := run("javascript", "1 + 1", nil); !res.Pooled || res.Value != "2" {
			t.Errorf("a run on a full node pool: pooled %v, %+v", res.Pooled, res)
		}
	})
	t.Run("a rootfs without node", func(t *testing.T) {
		_, err := d.client.Run(ctx, &agentapi.RunRequest{Language: "javascript", Code: "1", Rootfs: minimal})
		if !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "needs Node.js") || !strings.Contains(err.Error(), "python, bash") {
			t.Errorf("javascript on %s: %v", minimal, err)
		}
		_, err = d.client.CreateSession(ctx, &agentapi.SessionRequest{Language: "typescript", Rootfs: minimal})
		if !isStatus(err, http.StatusBadRequest) {
			t.Errorf("a typescript session on %s: %v", minimal, err)
		}
	})
	t.Run("a JavaScript session", func(t *testing.T) {
		s, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Language: "javascript"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.client.DeleteSession(ctx, s.ID)
		if s.Language != "javascript" {
			t.Errorf("session language %q", s.Language)
		}
		execOK(t, d, s.ID, "let a = 1\nconst fs = require('fs')\nclass P { constructor(x) { this.x = x } }")
		if res := execOK(t, d, s.ID, "a += 1\nnew P(a).x"); res.Value != "2" {
			t.Errorf("state across cells: %q", res.Value)
		}
		execOK(t, d, s.ID, "const r = await Promise.resolve(5)")
		if res := execOK(t, d, s.ID, "r * 2"); res.Value != "10" {
			t.Errorf("a top-level await's binding in the next cell: %q", res.Value)
		}
		res, err := d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "null.x"})
		if err != nil || res.Status != agentapi.StatusException || res.SessionDead {
			t.Fatalf("an exception: %v %+v", err, res)
		}
		res, err = d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "for (;;) {}", TimeoutMs: 2000}) // 2 s: after the cell started, on a busy machine too
		if err != nil || res.Status != agentapi.StatusTimeout || res.SessionDead {
			t.Fatalf("a cell timeout: %v %+v", err, res)
		}
		if res := execOK(t, d, s.ID, "fs.writeFileSync('out.txt', String(a)); a"); res.Value != "2" || len(res.Files) != 1 || res.Files[0].Path != "out.txt" {
			t.Errorf("after an exception and a timeout: %+v", res)
		}
	})
	t.Run("a Node session whose interpreter dies is dead with the reason", func(t *testing.T) {
		s, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Language: "javascript"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.client.DeleteSession(ctx, s.ID)
		res, err := d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "process.abort()"})
		if err != nil || !res.SessionDead || res.Error == "" {
			t.Fatalf("a cell that kills its interpreter: %v %+v", err, res)
		}
		info, err := d.client.Session(ctx, s.ID)
		if err != nil || info.State != agentapi.SessionDead || info.DeadReason == "" {
			t.Fatalf("the session afterwards: %v %+v", err, info)
		}
		if _, err := d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "1"}); !isStatus(err, http.StatusConflict) {
			t.Errorf("an exec on the dead session: %v, want 409", err)
		}
	})
	t.Run("a TypeScript session", func(t *testing.T) {
		s, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Language: "typescript"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.client.DeleteSession(ctx, s.ID)
		execOK(t, d, s.ID, "interface Pt { x: number }\nconst p: Pt = { x: 3 }")
		if res := execOK(t, d, s.ID, "p.x * 2"); res.Value != "6" {
			t.Errorf("typescript state: %q", res.Value)
		}
	})
}
