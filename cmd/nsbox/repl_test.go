package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestReplSavesFigures: `repl` has no --json; a figure is saved to a file
// it names (it said "use --json to get it").
func TestReplSavesFigures(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/sessions":
			writeJSON(w, http.StatusCreated, agentapi.Session{ID: "s1", Rootfs: "default"})
		case "POST /v1/sessions/s1/exec":
			writeStream(w, agentapi.Event{Type: agentapi.EventResult, Result: &agentapi.RunResult{Status: agentapi.StatusOK,
				Figures: []agentapi.Figure{{Mime: "image/png", DataBase64: base64.StdEncoding.EncodeToString(png)}}}})
		case "DELETE /v1/sessions/s1":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	dir := t.TempDir()
	_, stderr, code := runApp(t, "plt.plot([1, 2])\n", "repl", "--socket", sock, "--figures", dir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	want := filepath.Join(dir, "cell1-figure1.png")
	if !strings.Contains(stderr, "saved to "+want) || strings.Contains(stderr, "--json") {
		t.Errorf("stderr does not name the saved figure %s:\n%s", want, stderr)
	}
	if got, err := os.ReadFile(want); err != nil || !bytes.Equal(got, png) {
		t.Errorf("figure file: %q, %v", got, err)
	}
}
