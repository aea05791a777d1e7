package e2b

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// TestMigrateLegacyRecords: the records an older endpoint kept in
// <state_dir>/e2b/<id>.json move into their parked sessions' Meta at
// start and their files go: the paused sandbox is listed and connects
// with its tokens. A record whose session is gone or live is dropped; a
// session that has a record of its own keeps it; a file that cannot be
// read stays, and so does the directory with it.
func TestMigrateLegacyRecords(t *testing.T) {
	core := newFakeCore()
	keys, err := NewKeys([]string{keyA})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e2b")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	parked := func(id string) {
		core.sessions[id] = &agentapi.Session{ID: id, State: agentapi.SessionParked, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	// As the older endpoint's store wrote it (store.go, before the
	// records moved into the sessions).
	legacy := func(id, token string) {
		t.Helper()
		b := `{"id":"` + id + `","key_sha256":"` + keys.Fingerprint(0) + `","envd_access_token":"` + token +
			`","traffic_access_token":"t-` + token + `","template":"base","metadata":{"k":"v"},"envs":{"E":"1"},` +
			`"started_at":"2026-11-27T11:00:00Z","cpus":1,"memory_mb":512,"disk_mb":256,` +
			`"contexts":{"c1":{"id":"c1","language":"python","cwd":"/home/user"}},"auto_pause":true}`
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const (
		kept    = "00000000000000000000000000000001"
		gone    = "00000000000000000000000000000002"
		live    = "00000000000000000000000000000003"
		own     = "00000000000000000000000000000004"
		broken  = "00000000000000000000000000000005"
		renamed = "00000000000000000000000000000006"
	)
	parked(kept)
	legacy(kept, "tok")
	legacy(gone, "tok2")
	core.sessions[live] = &agentapi.Session{ID: live, State: agentapi.SessionIdle, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	legacy(live, "tok3")
	parked(own)
	legacy(own, "old")
	ownRec := &record{ID: own, Key: keys.Fingerprint(0), Token: "new", Contexts: map[string]codeContext{}}
	core.meta[own], _ = ownRec.meta()
	parked(broken)
	if err := os.WriteFile(filepath.Join(dir, broken+".json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	parked(renamed)
	legacy(renamed, "tok4")
	if err := os.Rename(filepath.Join(dir, renamed+".json"), filepath.Join(dir, kept+"x.json")); err != nil {
		t.Fatal(err)
	}

	s, err := New(Config{Core: core, Keys: keys, LegacyDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != kept+"x.json "+broken+".json" {
		t.Fatalf("left in the legacy directory: %v, want only the unreadable and the misnamed record", left)
	}
	if _, ok := core.meta[gone]; ok || core.meta[live] != nil {
		t.Fatalf("a record migrated into a gone or live session: %s", core.meta[live])
	}
	if rec, _ := recordFrom(own, core.meta[own]); rec == nil || rec.Token != "new" {
		t.Fatalf("the session's own record: %+v, want it kept over the legacy file", rec)
	}

	// The migrated sandbox is listed, paused, and connects with its
	// tokens, metadata, envs and contexts.
	w := do(t, s, "GET", "/v2/sandboxes?state=paused", "", map[string]string{"X-API-KEY": keyA})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), kept) {
		t.Fatalf("list: %d %s, want %s", w.Code, w.Body, kept)
	}
	w = do(t, s, "POST", "/v2/sandboxes/"+kept+"/connect", `{"timeout":60}`, map[string]string{"X-API-KEY": keyA})
	if w.Code != http.StatusCreated {
		t.Fatalf("connect: %d %s", w.Code, w.Body)
	}
	var sb sandboxJSON
	_ = json.Unmarshal(w.Body.Bytes(), &sb)
	if sb.EnvdAccessToken != "tok" || sb.TrafficAccessToken != "t-tok" || sb.Metadata["k"] != "v" || sb.Lifecycle.OnTimeout != "pause" {
		t.Fatalf("connected: %+v", sb)
	}
	if got := s.lookup(kept); got == nil || got.envs["E"] != "1" || !hasContext(got, "c1") {
		t.Fatalf("migrated sandbox %+v, want its envs and context c1", got)
	}

	// Once the last file is gone, so is the directory.
	for _, n := range left {
		_ = os.Remove(filepath.Join(dir, n))
	}
	if _, err := New(Config{Core: core, Keys: keys, LegacyDir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the emptied legacy directory: %v, want it removed", err)
	}
}

func hasContext(sb *sandbox, id string) bool {
	_, ok := sb.context(id)
	return ok
}
