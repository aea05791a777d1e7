package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/tests/testenv"
)

// e2bEnvd starts a daemon whose E2B endpoint listens on addr, creates a
// sandbox there (deleted at cleanup) and returns it as the create answered
// (its envdVersion too) with a function that POSTs to its envd: path,
// Content-Type, body and header pairs.
func e2bEnvd(t *testing.T, addr string) (map[string]any, func(path, ctype string, b []byte, hdr ...string) (int, string)) {
	t.Helper()
	api := e2bDaemon(t, addr)
	sb := e2bCreate(t, api)
	return sb, e2bEnvdOf(t, addr, sb)
}

// e2bDaemon starts a daemon whose E2B endpoint listens on addr and returns
// a function that sends its control plane a request with its API key:
// method, path, JSON body.
func e2bDaemon(t *testing.T, addr string) func(method, path, body string) (int, string) {
	t.Helper()
	key := "e2b_" + strings.Repeat("3c", 20)
	keys := filepath.Join(t.TempDir(), "e2b-keys")
	if err := os.WriteFile(keys, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[e2b]\nlisten = %q\nkeys_file = %q\n", addr, keys)))
	return func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", key)
		req.Header.Set("Content-Type", "application/json")
		return e2bDo(t, req)
	}
}

// e2bCreate creates a sandbox through api (e2bDaemon's), deleted at
// cleanup, and returns it as the create answered.
func e2bCreate(t *testing.T, api func(method, path, body string) (int, string)) map[string]any {
	t.Helper()
	code, body := api("POST", "/sandboxes", `{}`)
	var sb map[string]any
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	id, _ := sb["sandboxID"].(string)
	t.Cleanup(func() { api("DELETE", "/sandboxes/"+id, "") })
	return sb
}

// e2bEnvdOf returns a function that POSTs to the envd of sb (a sandbox
// as the endpoint on addr answered it): path, Content-Type, body and
// header pairs.
func e2bEnvdOf(t *testing.T, addr string, sb map[string]any) func(path, ctype string, b []byte, hdr ...string) (int, string) {
	id, _ := sb["sandboxID"].(string)
	token, _ := sb["envdAccessToken"].(string)
	return func(path, ctype string, b []byte, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "49983")
		req.Header.Set("X-Access-Token", token)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return e2bDo(t, req)
	}
}

func e2bDo(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestE2BWriteOnReadOnlyRoot: through a real daemon's E2B endpoint, a file
// written (/files) or a directory made (the filesystem service) outside
// the sandbox's writable places lands on its read-only rootfs: a 400
// (Connect invalid_argument) naming the path, the read-only filesystem
// and where writes go, not envd's 500; /tmp takes the same write.
func TestE2BWriteOnReadOnlyRoot(t *testing.T) {
	_, envd := e2bEnvd(t, "127.0.0.1:49991")
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
	code, body := envd("/filesystem.Filesystem/MakeDir", "application/json", []byte(`{"path": "/newdir"}`))
	if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_argument"`) || !strings.Contains(body, "/newdir: read-only file system") {
		t.Errorf("MakeDir /newdir: %d %s, want 400 invalid_argument naming /newdir", code, body)
	}
}

// TestE2BFileMetadata: through a real daemon's E2B endpoint, which
// answers as envd 0.6.4, file metadata in the workspace (a tmpfs, written
// by the core, its xattrs by the process agent): an upload's X-Metadata-*
// headers are answered back and surfaced by Stat, ListDir and Move; an
// overwrite without them clears them; envd's whole bound (4,096 bytes) is
// stored; metadata past it is a 400 and writes nothing.
func TestE2BFileMetadata(t *testing.T) {
	testenv.SkipWithoutTmpfsUserXattrs(t)
	sb, envd := e2bEnvd(t, "127.0.0.1:49992")
	if v := sb["envdVersion"]; v != "0.6.4" {
		t.Errorf("envdVersion %v, want 0.6.4", v)
	}
	const meta = `"metadata":{"author":"mish","purpose":"upload"}`
	upload := func(path string, hdr ...string) (int, string) {
		t.Helper()
		return envd("/files?path="+path, "application/octet-stream", []byte("content"), hdr...)
	}
	rpc := func(method, body string) string {
		t.Helper()
		code, out := envd("/filesystem.Filesystem/"+method, "application/json", []byte(body))
		if code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, body, code, out)
		}
		return out
	}
	if code, body := upload("m/a.txt", "X-Metadata-Author", "mish", "X-Metadata-Purpose", "upload"); code != http.StatusOK || !strings.Contains(body, meta) {
		t.Fatalf("upload with metadata: %d %s, want %s", code, body, meta)
	}
	want := map[string]string{"author": "mish", "purpose": "upload"}
	if out := rpc("Stat", `{"path": "/home/user/m/a.txt"}`); !entryMeta(t, out, want) {
		t.Errorf("Stat: %s lacks %s", out, meta)
	}
	if out := rpc("ListDir", `{"path": "m"}`); !entryMeta(t, out, want) {
		t.Errorf("ListDir: %s lacks %s", out, meta)
	}
	if out := rpc("Move", `{"source": "m/a.txt", "destination": "m/b.txt"}`); !entryMeta(t, out, want) {
		t.Errorf("Move: %s lacks %s", out, meta)
	}
	if code, body := upload("m/b.txt"); code != http.StatusOK || strings.Contains(body, "metadata") {
		t.Errorf("overwrite without metadata: %d %s, want none", code, body)
	}
	if out := rpc("Stat", `{"path": "m/b.txt"}`); strings.Contains(out, "metadata") {
		t.Errorf("Stat after the overwrite: %s, want no metadata", out)
	}

	a, b := strings.Repeat("x", 4096-2*len("user.e2b.a")-2000), strings.Repeat("y", 2000)
	if code, body := upload("m/max.txt", "X-Metadata-A", a, "X-Metadata-B", b); code != http.StatusOK || !strings.Contains(body, `"b":"`+b+`"`) {
		t.Errorf("4,096 bytes of metadata: %d %.300s, want 200 with all of it", code, body)
	}
	if code, body := upload("m/over.txt", "X-Metadata-A", a, "X-Metadata-B", b+"y"); code != http.StatusBadRequest || !strings.Contains(body, "at most 4096") {
		t.Errorf("4,097 bytes of metadata: %d %.300s, want 400 saying the bound", code, body)
	}
	if code, body := envd("/filesystem.Filesystem/Stat", "application/json", []byte(`{"path": "m/over.txt"}`)); code != http.StatusNotFound {
		t.Errorf("the refused upload's file: Stat %d %s, want not found", code, body)
	}
}

// TestE2BFileMetadataKept: a file's and a directory's metadata (user.e2b.*
// xattrs in the workspace) are kept across a pause and resume (the
// session parked, its workspace archived on disk and restored) and in a
// fork (the workspace copied), read back by Stat through the endpoint.
func TestE2BFileMetadataKept(t *testing.T) {
	testenv.SkipWithoutTmpfsUserXattrs(t)
	const addr = "127.0.0.1:49993"
	api := e2bDaemon(t, addr)
	sb := e2bCreate(t, api)
	id, _ := sb["sandboxID"].(string)
	envd := e2bEnvdOf(t, addr, sb)
	const meta = `"metadata":{"author":"mish","purpose":"kept"}`
	if code, body := envd("/files?path=kept/a.txt", "application/octet-stream", []byte("content"),
		"X-Metadata-Author", "mish", "X-Metadata-Purpose", "kept"); code != http.StatusOK || !strings.Contains(body, meta) {
		t.Fatalf("upload with metadata: %d %s, want %s", code, body, meta)
	}
	stat := func(envd func(path, ctype string, b []byte, hdr ...string) (int, string), when string) {
		t.Helper()
		code, out := envd("/filesystem.Filesystem/Stat", "application/json", []byte(`{"path": "kept/a.txt"}`))
		if code != http.StatusOK || !entryMeta(t, out, map[string]string{"author": "mish", "purpose": "kept"}) {
			t.Errorf("Stat %s: %d %s, want %s", when, code, out, meta)
		}
	}
	if code, body := api("POST", "/sandboxes/"+id+"/pause", `{}`); code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", code, body)
	}
	code, body := api("POST", "/sandboxes/"+id+"/connect", `{"timeout": 300}`)
	if code != http.StatusCreated {
		t.Fatalf("connect (resume): %d %s", code, body)
	}
	var resumed map[string]any
	if err := json.Unmarshal([]byte(body), &resumed); err != nil {
		t.Fatal(err)
	}
	stat(e2bEnvdOf(t, addr, resumed), "after a pause and resume")

	code, body = api("POST", "/sandboxes/"+id+"/fork", `{"count": 1}`)
	var forks []struct{ Sandbox map[string]any }
	if code != http.StatusCreated && code != http.StatusOK || json.Unmarshal([]byte(body), &forks) != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %d %s", code, body)
	}
	fid, _ := forks[0].Sandbox["sandboxID"].(string)
	t.Cleanup(func() { api("DELETE", "/sandboxes/"+fid, "") })
	stat(e2bEnvdOf(t, addr, forks[0].Sandbox), "in a fork")
}

// entryMeta reports whether the entry (Stat, Move: "entry") or every
// entry (ListDir: "entries") of a Connect JSON answer has the metadata
// want. Decoded, never compared as text: protojson's output varies its
// spacing from run to run on purpose.
func entryMeta(t *testing.T, out string, want map[string]string) bool {
	t.Helper()
	type entry struct{ Metadata map[string]string }
	var a struct {
		Entry   *entry
		Entries []entry
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	entries := a.Entries
	if a.Entry != nil {
		entries = append(entries, *a.Entry)
	}
	for _, e := range entries {
		if !maps.Equal(e.Metadata, want) {
			return false
		}
	}
	return len(entries) > 0
}
