package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// e2bKeyed starts a daemon (extra: lines of its config) whose E2B endpoint on addr
// has two API keys, and returns it with a function per key that sends the
// control plane a request: method, path, JSON body.
func e2bKeyed(t *testing.T, addr string, extra ...string) (d *daemon, a, b func(method, path, body string) (int, string)) {
	t.Helper()
	keyA, keyB := "e2b_"+strings.Repeat("5a", 20), "e2b_"+strings.Repeat("5b", 20)
	keys := filepath.Join(t.TempDir(), "e2b-keys")
	if err := os.WriteFile(keys, []byte(keyA+"\n"+keyB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[e2b]\nlisten = %q\nkeys_file = %q\n%s", addr, keys, strings.Join(extra, "\n"))))
	as := func(key string) func(method, path, body string) (int, string) {
		return func(method, path, body string) (int, string) {
			t.Helper()
			req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
			req.Header.Set("X-API-KEY", key)
			req.Header.Set("Content-Type", "application/json")
			return e2bDo(t, req)
		}
	}
	return d, as(keyA), as(keyB)
}

// e2bRead reads path in sb's workspace through its envd (GET /files).
func e2bRead(t *testing.T, addr string, sb map[string]any, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/files?path="+path, nil)
	id, _ := sb["sandboxID"].(string)
	token, _ := sb["envdAccessToken"].(string)
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	req.Header.Set("X-Access-Token", token)
	return e2bDo(t, req)
}

// e2bRunCode runs code in sb's default Python context (POST /execute)
// and returns the answer's NDJSON.
func e2bRunCode(t *testing.T, addr string, sb map[string]any, code string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"code": code})
	req, _ := http.NewRequest("POST", "http://"+addr+"/execute", strings.NewReader(string(b)))
	id, _ := sb["sandboxID"].(string)
	token, _ := sb["envdAccessToken"].(string)
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", "49999")
	req.Header.Set("X-Access-Token", token)
	req.Header.Set("Content-Type", "application/json")
	st, out := e2bDo(t, req)
	if st != http.StatusOK {
		t.Fatalf("execute %q: %d %s", code, st, out)
	}
	return out
}

// e2bSnapshotIDs is GET /snapshots's answer's snapshot ids.
func e2bSnapshotIDs(t *testing.T, api func(method, path, body string) (int, string), query string) []string {
	t.Helper()
	code, body := api("GET", "/snapshots"+query, "")
	var list []struct {
		SnapshotID string `json:"snapshotID"`
		SizeBytes  int64  `json:"sizeBytes"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /snapshots%s: %d %s", query, code, body)
	}
	ids := []string{}
	for _, s := range list {
		if s.SizeBytes <= 0 {
			t.Errorf("snapshot %s listed with size %d", s.SnapshotID, s.SizeBytes)
		}
		ids = append(ids, s.SnapshotID)
	}
	return ids
}

// TestE2BSnapshots: through a real daemon's E2B endpoint, a snapshot of a
// running sandbox keeps its files and Python variables while the sandbox
// runs on; two sandboxes started from it each get them, apart, and so do
// four started at once; a copy gets the envVars it is created with; it is listed (by sandbox, by name) and started
// from again after a daemon restart; another API key can neither list,
// start from, delete nor take it; a delete removes its files.
func TestE2BSnapshots(t *testing.T) {
	const addr = "127.0.0.1:49993"
	d, api, other := e2bKeyed(t, addr)
	src := e2bCreate(t, api)
	id, _ := src["sandboxID"].(string)
	envd := e2bEnvdOf(t, addr, src)
	if code, body := envd("/files?path=app/a.txt", "application/octet-stream", []byte("taken")); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	e2bRunCode(t, addr, src, "kept = 41")

	code, body := api("POST", "/sandboxes/"+id+"/snapshots", `{"name": "team/mysnap"}`)
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &snap) != nil || snap.SnapshotID == "" || len(snap.Names) != 1 || snap.Names[0] != "team/mysnap" {
		t.Fatalf("create snapshot: %d %s", code, body)
	}
	// The sandbox runs on: a write after the snapshot is its own.
	if code, body := envd("/files?path=app/a.txt", "application/octet-stream", []byte("after")); code != http.StatusOK {
		t.Fatalf("upload after the snapshot: %d %s", code, body)
	}

	// Another key: nothing to see, start from, delete or take.
	if ids := e2bSnapshotIDs(t, other, ""); len(ids) != 0 {
		t.Errorf("another key lists %v", ids)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/sandboxes", `{"templateID": "` + snap.SnapshotID + `"}`},
		{"POST", "/sandboxes", `{"templateID": "team/mysnap"}`},
		{"DELETE", "/templates/" + snap.SnapshotID, ""},
		{"POST", "/sandboxes/" + id + "/snapshots", `{}`},
	} {
		if code, body := other(c.method, c.path, c.body); code != http.StatusNotFound {
			t.Errorf("another key: %s %s: %d %s, want 404", c.method, c.path, code, body)
		}
	}

	for _, q := range []string{"", "?sandboxID=" + id, "?name=team/mysnap", "?name=team/mysnap:default"} {
		if ids := e2bSnapshotIDs(t, api, q); len(ids) != 1 || ids[0] != snap.SnapshotID {
			t.Errorf("GET /snapshots%s: %v, want [%s]", q, ids, snap.SnapshotID)
		}
	}
	if ids := e2bSnapshotIDs(t, api, "?name=nope"); len(ids) != 0 {
		t.Errorf("GET /snapshots?name=nope: %v", ids)
	}

	start := func(template string) map[string]any {
		t.Helper()
		code, body := api("POST", "/sandboxes", `{"templateID": "`+template+`"}`)
		var sb map[string]any
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil {
			t.Fatalf("create from snapshot %s: %d %s", template, code, body)
		}
		sid, _ := sb["sandboxID"].(string)
		t.Cleanup(func() { api("DELETE", "/sandboxes/"+sid, "") })
		return sb
	}
	one, two := start(snap.SnapshotID), start("team/mysnap:default")
	if code, body := e2bEnvdOf(t, addr, one)("/files?path=app/a.txt", "application/octet-stream", []byte("one's")); code != http.StatusOK {
		t.Fatalf("upload in the first copy: %d %s", code, body)
	}
	if code, got := e2bRead(t, addr, two, "app/a.txt"); code != http.StatusOK || got != "taken" {
		t.Errorf("the second copy's file: %d %q, want %q", code, got, "taken")
	}
	if out := e2bRunCode(t, addr, two, "kept + 1"); !strings.Contains(out, `"42"`) {
		t.Errorf("the second copy's Python variable: %s, want 42", out)
	}

	// A copy's envVars are added to its environment.
	code, body = api("POST", "/sandboxes", `{"templateID": "`+snap.SnapshotID+`", "envVars": {"COPY_ENV": "given"}}`)
	var withEnv map[string]any
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &withEnv) != nil {
		t.Fatalf("create from the snapshot with envVars: %d %s", code, body)
	}
	wid, _ := withEnv["sandboxID"].(string)
	t.Cleanup(func() { api("DELETE", "/sandboxes/"+wid, "") })
	if out := e2bRunCode(t, addr, withEnv, "import os; os.environ.get('COPY_ENV')"); !strings.Contains(out, `"given"`) {
		t.Errorf("a copy's envVars: %s, want given", out)
	}

	// Started from at once: each copy gets the snapshot's file.
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := api("POST", "/sandboxes", `{"templateID": "`+snap.SnapshotID+`"}`)
			var sb map[string]any
			if code != http.StatusCreated || json.Unmarshal([]byte(body), &sb) != nil {
				got[i] = fmt.Sprintf("create: %d %s", code, body)
				return
			}
			sid, _ := sb["sandboxID"].(string)
			defer api("DELETE", "/sandboxes/"+sid, "")
			code, got[i] = e2bRead(t, addr, sb, "app/a.txt")
			if code != http.StatusOK {
				got[i] = fmt.Sprintf("read: %d %s", code, got[i])
			}
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != "taken" {
			t.Errorf("copy %d of 4 started at once: %q, want %q", i, g, "taken")
		}
	}

	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	if ids := e2bSnapshotIDs(t, api, ""); len(ids) != 1 || ids[0] != snap.SnapshotID {
		t.Fatalf("after a restart: %v", ids)
	}
	if code, got := e2bRead(t, addr, start(snap.SnapshotID), "app/a.txt"); code != http.StatusOK || got != "taken" {
		t.Errorf("a copy after a restart: %d %q", code, got)
	}

	dir := filepath.Join(filepath.Dir(d.parkDir()), "snapshots", snap.SnapshotID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the snapshot's files: %v", err)
	}
	if code, body := api("DELETE", "/templates/"+snap.SnapshotID, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the snapshot's files after its delete: %v", err)
	}
	if code, body := api("DELETE", "/templates/"+snap.SnapshotID, ""); code != http.StatusNotFound {
		t.Errorf("delete again: %d %s, want 404", code, body)
	}
}

// TestE2BSnapshotFull: a snapshot past [sessions] park_max_bytes (which
// parked sessions and snapshots share) is a 507 that leaves no files, and
// the sandbox runs on; a paused sandbox's snapshot is a 409.
func TestE2BSnapshotFull(t *testing.T) {
	const addr = "127.0.0.1:49993"
	d, api, _ := e2bKeyed(t, addr, "[sessions]\npark_max_bytes = 100000")
	src := e2bCreate(t, api)
	id, _ := src["sandboxID"].(string)
	envd := e2bEnvdOf(t, addr, src)
	if code, body := envd("/files?path=big", "application/octet-stream", []byte(strings.Repeat("x", 200000))); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := api("POST", "/sandboxes/"+id+"/snapshots", `{}`); code != http.StatusInsufficientStorage || !strings.Contains(body, "park_max_bytes") {
		t.Errorf("snapshot past the cap: %d %s, want 507 naming park_max_bytes", code, body)
	}
	if ents, _ := os.ReadDir(filepath.Join(filepath.Dir(d.parkDir()), "snapshots")); len(ents) != 0 {
		t.Errorf("a refused snapshot left files: %v", ents)
	}
	if code, got := e2bRead(t, addr, src, "big"); code != http.StatusOK || len(got) != 200000 {
		t.Errorf("the sandbox after a refused snapshot: %d, %d bytes", code, len(got))
	}
	small, _ := e2bCreate(t, api)["sandboxID"].(string)
	if code, body := api("POST", "/sandboxes/"+small+"/pause", `{}`); code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", code, body)
	}
	if code, body := api("POST", "/sandboxes/"+small+"/snapshots", `{}`); code != http.StatusConflict {
		t.Errorf("snapshot of a paused sandbox: %d %s, want 409", code, body)
	}
}
