package envd

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem/filesystemconnect"
)

// TestFilesOutsideTheWorkspace: a path outside /home/user goes to the
// sandbox's process agent (here on the host, for the protocol alone; the
// sandbox's side is container/procs' TestFilesInTheSandbox and
// TestFilesCannotReachTheHost): /files writes and reads it, the
// filesystem service stats, lists, moves and removes it, envd's answers
// for a missing path (404, not_found), a directory read as a file (400)
// and a directory made twice (already_exists); root's changes there are
// refused before the agent is asked.
func TestFilesOutsideTheWorkspace(t *testing.T) {
	srv := newServer(t, &agentCore{a: hostAgent(t)})
	c := filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL)
	ctx := context.Background()
	dir := t.TempDir() // outside /home/user
	file := filepath.Join(dir, "a", "b.txt")

	do := func(method, url, ctype string, body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+url, body)
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := do("POST", "/files?path="+file, "application/octet-stream", strings.NewReader("hello")); code != 200 || !strings.Contains(body, `"path":"`+file+`"`) {
		t.Fatalf("upload to %s: %d %s", file, code, body)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "hello" {
		t.Fatalf("the file holds %q, %v", b, err)
	}
	if code, body := do("GET", "/files?path="+file, "", nil); code != 200 || body != "hello" {
		t.Fatalf("download: %d %q", code, body)
	}
	for url, want := range map[string]int{"/files?path=" + dir + "/missing": 404, "/files?path=" + dir + "/a": 400} {
		code, body := do("GET", url, "", nil)
		var e errorJSON
		if code != want || json.Unmarshal([]byte(body), &e) != nil || e.Code != want {
			t.Errorf("GET %s: %d %s, want %d", url, code, body, want)
		}
	}

	st, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: file}))
	if err != nil || st.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_FILE || st.Msg.GetEntry().GetPath() != file || st.Msg.GetEntry().GetSize() != 5 {
		t.Fatalf("Stat: %v, %v", st, err)
	}
	if _, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/a"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("MakeDir of an existing directory: %v, want already_exists", err)
	}
	mv, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: file, Destination: dir + "/c/d.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != dir+"/c/d.txt" {
		t.Fatalf("Move: %v, %v", mv, err)
	}
	ls, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir, Depth: 2}))
	var paths []string
	for _, e := range ls.Msg.GetEntries() {
		paths = append(paths, strings.TrimPrefix(e.GetPath(), dir+"/"))
	}
	if err != nil || !strings.Contains(strings.Join(paths, " "), "c/d.txt") || len(paths) != 3 {
		t.Fatalf("ListDir to depth 2: %q, %v; want a, c, c/d.txt", paths, err)
	}
	if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: dir + "/c"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/c"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("Stat after Remove: %v, want not_found", err)
	}

	asRoot := connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/root"})
	asRoot.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("root:")))
	if _, err := c.MakeDir(ctx, asRoot); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "not root") {
		t.Errorf("MakeDir as root outside the workspace: %v, want invalid_argument saying why", err)
	}
	if _, err := os.Stat(dir + "/root"); err == nil {
		t.Error("root's MakeDir made the directory")
	}
}
