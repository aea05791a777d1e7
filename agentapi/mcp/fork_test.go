package mcp

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// TestForkSession checks fork_session: it forks the conversation's Python
// session (made first if need be), says which branches it made and what
// they lack, the branches answer run_python by session_id, and they are
// deleted with the connection; the operator's volumes and datasets go
// into every session and are named in run_python's description.
func TestForkSession(t *testing.T) {
	fd, cl := newFakeDaemon(t, map[string]string{})
	vols := []agentapi.VolumeMount{{Name: "notes"}, {Name: "ref", Path: "/mnt/r", ReadOnly: true}}
	cs := connectConfig(t, Config{Client: cl, Volumes: vols, Datasets: []string{"corpus"}})

	res, text := call(t, cs, ToolForkSession, map[string]any{"count": 2})
	if res.IsError || !strings.Contains(text, "Made 2 branch(es) of session s1: b2, b3") || !strings.Contains(text, "- f: an open file") {
		t.Fatalf("fork_session: isError %v, %q", res.IsError, text)
	}
	if _, text := call(t, cs, ToolRunPython, map[string]any{"code": "x", "session_id": "b3"}); !strings.Contains(text, "python:x") {
		t.Fatalf("run_python in a branch: %q", text)
	}
	if res, text := call(t, cs, ToolForkSession, map[string]any{"count": MaxForkBranches + 1}); !res.IsError || !strings.Contains(text, "maximum") {
		t.Fatalf("fork_session count %d: isError %v, %q", MaxForkBranches+1, res.IsError, text)
	}
	fd.mu.Lock()
	reqs := slices.Clone(fd.requests)
	fd.mu.Unlock()
	if len(reqs) != 1 || !slices.Equal(reqs[0].Volumes, vols) || !slices.Equal(reqs[0].Datasets, []string{"corpus"}) {
		t.Fatalf("session requests %+v: want one with the operator's mounts", reqs)
	}

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == ToolRunPython && !strings.Contains(tool.Description, "Mounted: /mnt/notes (a volume kept across sessions), /mnt/r (a volume kept across sessions, read-only), /mnt/corpus (a read-only dataset).") {
			t.Errorf("run_python's description does not name the mounts: %s", tool.Description)
		}
	}

	cs.Close()
	for deadline := time.Now().Add(time.Minute); len(fd.live()) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sessions live after the connection ended: %v", fd.live())
		}
	}
}
