package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2BWriteOnReadOnlyRoot: through a real daemon's E2B endpoint, a file
// written (/files) or a directory made (the filesystem service) outside
// the sandbox's writable places lands on its read-only rootfs: a 400
// (Connect invalid_argument) naming the path, the read-only filesystem
// and where writes go, not envd's 500; /tmp takes the same write.
func TestE2BWriteOnReadOnlyRoot(t *testing.T) {
	const addr = "127.0.0.1:49991"
	key := "e2b_" + strings.Repeat("3c", 20)
	keys := filepath.Join(t.TempDir(), "e2b-keys")
	if err := os.WriteFile(keys, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[e2b]\nlisten = %q\nkeys_file = %q\n", addr, keys)))

	do := func(req *http.Request) (int, string) {
		t.Helper()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/sandboxes", strings.NewReader(`{}`))
	req.Header.Set("X-API-KEY", key)
	req.Header.Set("Content-Type", "application/json")
	code, body := do(req)
	var sb struct{ SandboxID, EnvdAccessToken string }
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", "http://"+addr+"/sandboxes/"+sb.SandboxID, nil)
		req.Header.Set("X-API-KEY", key)
		do(req)
	})
	envd := func(path, ctype string, b []byte) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "49983")
		req.Header.Set("X-Access-Token", sb.EnvdAccessToken)
		return do(req)
	}

	if code, body := envd("/files?path=/tmp/x", "application/octet-stream", []byte("x")); code != http.StatusOK {
		t.Fatalf("write /tmp/x: %d %s", code, body)
	}
	for _, path := range []string{"/x", "/etc/nsbox-e2b"} {
		code, body := envd("/files?path="+path, "application/octet-stream", []byte("x"))
		if code != http.StatusBadRequest {
			t.Errorf("write %s: %d %s, want 400", path, code, body)
		}
		for _, w := range []string{path + ": read-only file system", "the sandbox's root filesystem", "write under /home/user (the workspace), /tmp or /dev/shm"} {
			if !strings.Contains(body, w) {
				t.Errorf("write %s: %s lacks %q", path, body, w)
			}
		}
	}
	code, body = envd("/filesystem.Filesystem/MakeDir", "application/json", []byte(`{"path": "/newdir"}`))
	if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_argument"`) || !strings.Contains(body, "/newdir: read-only file system") {
		t.Errorf("MakeDir /newdir: %d %s, want 400 invalid_argument naming /newdir", code, body)
	}
}
