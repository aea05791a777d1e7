package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// TestDeclaredLanguages: a language the operator declares runs without
// new code, its program from a file or from stdin, with the same limits
// and verdicts as any run; an undeclared one is a 400 that lists what the
// rootfs has, and GET /v1/info lists the languages per rootfs.
func TestDeclaredLanguages(t *testing.T) {
	_, name := testRootfs(t)
	conf := filepath.Join(t.TempDir(), "nsbox.toml")
	if err := os.WriteFile(conf, []byte(`
[languages.awk]
argv = ["awk", "-f", "{file}"]
extension = ".awk"

[languages.py-stdin]
argv = ["python3", "-"]

[languages.elsewhere]
argv = ["true"]
rootfs = ["no-such-rootfs"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--config", conf, "--default-rootfs", name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(lang, code string, lim *agentapi.Limits) *agentapi.RunResult {
		t.Helper()
		res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: lang, Code: code, Limits: lim, ReturnFiles: []string{"*.txt"}})
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		return res
	}

	res := run("awk", `BEGIN { print 6*7; print "out" > "/workspace/result.txt" }`, nil)
	if res.Status != agentapi.StatusOK || res.Stdout != "42\n" {
		t.Fatalf("awk: %+v", res)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "result.txt" {
		t.Errorf("files %+v: the program's own file must not be reported, the one it wrote must", res.Files)
	}
	if res := run("py-stdin", "import sys; print(sys.argv, 6*7)", nil); res.Stdout != "['-'] 42\n" {
		t.Errorf("stdin language: %+v", res)
	}
	if res := run("awk", `BEGIN { exit 3 }`, nil); res.Status != agentapi.StatusExitNonzero || res.ExitCode != 3 {
		t.Errorf("exit 3: %+v", res)
	}
	if res := run("awk", `BEGIN { while (1) {} }`, &agentapi.Limits{TimeoutMs: 500}); res.Status != agentapi.StatusTimeout {
		t.Errorf("a loop under a 500 ms limit: %+v", res)
	}
	if res := run("awk", `BEGIN { s = "x"; while (1) s = s s }`, &agentapi.Limits{MemoryBytes: 64 << 20, TimeoutMs: 20_000}); res.Status != agentapi.StatusOOM {
		t.Errorf("a memory bomb under 64 MiB: %s", res.Status)
	}

	for _, lang := range []string{"cobol", "elsewhere"} {
		_, err := d.client.Run(ctx, &agentapi.RunRequest{Language: lang, Code: "x"})
		if !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "python, bash, awk, py-stdin") {
			t.Errorf("%s: got %v, want a 400 listing the rootfs's languages", lang, err)
		}
	}
	info, err := d.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(info.Languages[name], ","); got != "python,bash,awk,py-stdin" {
		t.Errorf("info languages[%s] = %s", name, got)
	}
}
