package envd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem/filesystemconnect"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/container/workspace"
	"github.com/nsbox/nsbox/daemon/wire"
)

// workspaceCore serves StatFile and ListDir from a real workspace (the
// engine's no-follow operations over a host directory), converted as the
// core converts them.
type workspaceCore struct {
	Core
	w *workspace.Workspace
}

// Processes answers that the agent is gone: a symlink out of the
// workspace is then described by its path alone.
func (c *workspaceCore) Processes(context.Context, string) (*procs.Agent, error) {
	return nil, procs.ErrClosed
}

func (c *workspaceCore) StatFile(_ context.Context, _, p string) (*agentapi.WorkspaceFile, error) {
	e, err := c.w.Stat(p)
	if err != nil {
		return nil, err
	}
	wf := wire.Entry(e)
	return &wf, nil
}

func (c *workspaceCore) ListDir(_ context.Context, _, dir string, depth int) ([]agentapi.WorkspaceFile, error) {
	entries, _, err := c.w.ListDir(dir, depth)
	var out []agentapi.WorkspaceFile
	for _, e := range entries {
		out = append(out, wire.Entry(e))
	}
	return out, err
}

// TestEntryInfo: Stat and ListDir describe entries as envd's EntryInfo
// does: mode the permission bits alone, permissions Go's mode string of
// the entry itself, a directory's lstat size, and a symlink by where it
// leads (its target's type and bits, symlink_target the resolved
// sandbox path; envd's own path and no type when it does not resolve).
func TestEntryInfo(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("test"), 0o644))
	must(os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(os.Chmod(filepath.Join(dir, "d"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "d", "run.sh"), nil, 0o755))
	must(os.Chmod(filepath.Join(dir, "d", "run.sh"), os.ModeSetuid|0o755))
	must(os.Symlink("a.txt", filepath.Join(dir, "link")))               // relative
	must(os.Symlink("/home/user/link", filepath.Join(dir, "chain")))    // absolute, to a link
	must(os.Symlink("../d", filepath.Join(dir, "d", "up")))             // to a directory, through ..
	must(os.Symlink("missing", filepath.Join(dir, "broken")))           // to nothing
	must(os.Symlink("loop", filepath.Join(dir, "loop")))                // to itself
	must(os.Symlink("/usr/bin/python3", filepath.Join(dir, "outside"))) // out of the workspace
	var st os.FileInfo
	st, err := os.Lstat(filepath.Join(dir, "d"))
	must(err)
	dirSize := st.Size()
	if dirSize == 0 {
		t.Skipf("%s's filesystem gives directories no size", dir)
	}

	w, err := workspace.OpenDir(dir, os.Getuid(), os.Getgid())
	must(err)
	t.Cleanup(func() { w.Close() })
	srv := newServer(t, &workspaceCore{w: w})
	c := filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL)
	ctx := context.Background()

	type want struct {
		typ         filesystem.FileType
		mode        uint32
		permissions string
		size        int64 // -1: not checked
		target      string
	}
	check := func(t *testing.T, e *filesystem.EntryInfo, w want) {
		t.Helper()
		if e.GetType() != w.typ || e.GetMode() != w.mode || e.GetPermissions() != w.permissions || w.size >= 0 && e.GetSize() != w.size || e.GetSymlinkTarget() != w.target || (w.target == "") != (e.SymlinkTarget == nil) {
			t.Errorf("%s: type %v mode %#o permissions %q size %d target %v; want %+v", e.GetPath(), e.GetType(), e.GetMode(), e.GetPermissions(), e.GetSize(), e.SymlinkTarget, w)
		}
	}
	file := filesystem.FileType_FILE_TYPE_FILE
	directory := filesystem.FileType_FILE_TYPE_DIRECTORY
	none := filesystem.FileType_FILE_TYPE_UNSPECIFIED
	for _, tc := range []struct {
		path string
		want want
	}{
		{"a.txt", want{file, 0o644, "-rw-r--r--", 4, ""}},
		{"d", want{directory, 0o755, "drwxr-xr-x", dirSize, ""}},
		{"/home/user/d/run.sh", want{file, 0o755, "urwxr-xr-x", 0, ""}},
		{"link", want{file, 0o644, "Lrwxrwxrwx", -1, "/home/user/a.txt"}},
		{"chain", want{file, 0o644, "Lrwxrwxrwx", -1, "/home/user/a.txt"}},
		{"d/up", want{directory, 0o755, "Lrwxrwxrwx", -1, "/home/user/d"}},
		{"broken", want{none, 0, "Lrwxrwxrwx", -1, "/home/user/broken"}},
		{"loop", want{none, 0, "Lrwxrwxrwx", -1, "/home/user/loop"}},
		{"outside", want{none, 0, "Lrwxrwxrwx", -1, "/usr/bin/python3"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			res, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: tc.path}))
			if err != nil {
				t.Fatal(err)
			}
			check(t, res.Msg.GetEntry(), tc.want)
		})
	}

	// A listing describes its entries the same way.
	res, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/home/user"}))
	must(err)
	got := map[string]*filesystem.EntryInfo{}
	for _, e := range res.Msg.GetEntries() {
		got[e.GetName()] = e
	}
	if len(got) != 7 {
		t.Fatalf("listed %d entries, want 7: %v", len(got), res.Msg.GetEntries())
	}
	check(t, got["d"], want{directory, 0o755, "drwxr-xr-x", dirSize, ""})
	check(t, got["link"], want{file, 0o644, "Lrwxrwxrwx", -1, "/home/user/a.txt"})
	check(t, got["broken"], want{none, 0, "Lrwxrwxrwx", -1, "/home/user/broken"})
}
