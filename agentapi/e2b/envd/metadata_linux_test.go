package envd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem/filesystemconnect"
	"github.com/nsbox/nsbox/container/procs"
)

// TestFileMetadata: an upload's X-Metadata-* headers become the file's
// metadata (envd 0.6.2), raw and multipart (every file of the form),
// answered by the upload and surfaced by Stat, ListDir and Move; an
// upload without any clears it; metadata envd would refuse (not printable
// ASCII, a key too long, more than 4,096 bytes) is a 400 before anything
// is written. Outside the workspace, through the process agent (here on
// the host, for the protocol; the sandbox's side is procs.TestFileMeta,
// the workspace's tests/integration's TestE2BFileMetadata).
func TestFileMetadata(t *testing.T) {
	srv := newServer(t, &agentCore{a: hostAgent(t)})
	c := filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL)
	ctx := context.Background()
	dir := t.TempDir()
	upload := func(path string, meta map[string]string, files ...string) (int, []entryJSON, string) {
		t.Helper()
		var body io.Reader = strings.NewReader("content")
		ctype := "application/octet-stream"
		url := srv.URL + "/files?path=" + path
		if len(files) > 0 {
			var b strings.Builder
			mw := multipart.NewWriter(&b)
			for _, f := range files {
				w, _ := mw.CreateFormFile("file", f)
				_, _ = w.Write([]byte("content"))
			}
			mw.Close()
			body, ctype, url = strings.NewReader(b.String()), mw.FormDataContentType(), srv.URL+"/files"
		}
		req, err := http.NewRequest("POST", url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		for k, v := range meta {
			req.Header.Set(metaHeader+k, v)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var out []entryJSON
		if res.StatusCode == http.StatusOK {
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("upload's answer %s: %v", b, err)
			}
		}
		return res.StatusCode, out, string(b)
	}
	stat := func(p string) map[string]string {
		t.Helper()
		st, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: p}))
		if err != nil {
			t.Fatalf("Stat %s: %v", p, err)
		}
		return st.Msg.GetEntry().GetMetadata()
	}

	want := map[string]string{"author": "mish", "purpose": "upload"}
	file := filepath.Join(dir, "a.txt")
	if code, out, body := upload(file, map[string]string{"Author": "mish", "purpose": "upload"}); code != 200 || len(out) != 1 || !maps.Equal(out[0].Metadata, want) {
		t.Fatalf("raw upload with metadata: %d %s; want 200 with %v (keys lower-cased)", code, body, want)
	}
	if got := stat(file); !maps.Equal(got, want) {
		t.Fatalf("Stat's metadata %v, want %v", got, want)
	}
	multi := map[string]string{"source": "test-suite"}
	f1, f2 := filepath.Join(dir, "m", "1.txt"), filepath.Join(dir, "m", "2.txt")
	if code, out, body := upload("", multi, f1, f2); code != 200 || len(out) != 2 || !maps.Equal(out[0].Metadata, multi) || !maps.Equal(out[1].Metadata, multi) {
		t.Fatalf("multipart upload of two files with metadata: %d %s; want both with %v", code, body, multi)
	}
	ls, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: filepath.Join(dir, "m")}))
	if err != nil || len(ls.Msg.GetEntries()) != 2 {
		t.Fatalf("ListDir: %v, %v", ls, err)
	}
	for _, e := range ls.Msg.GetEntries() {
		if !maps.Equal(e.GetMetadata(), multi) {
			t.Errorf("ListDir: %s's metadata %v, want %v", e.GetName(), e.GetMetadata(), multi)
		}
	}
	mv, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: f1, Destination: filepath.Join(dir, "moved.txt")}))
	if err != nil || !maps.Equal(mv.Msg.GetEntry().GetMetadata(), multi) {
		t.Fatalf("Move: %v, %v; want metadata %v", mv, err, multi)
	}
	if code, out, body := upload(file, nil); code != 200 || len(out) != 1 || out[0].Metadata != nil || strings.Contains(body, "metadata") {
		t.Fatalf("overwrite without metadata: %d %s; want none", code, body)
	}
	if got := stat(file); got != nil {
		t.Fatalf("Stat after the overwrite: %v, want no metadata", got)
	}

	refused := filepath.Join(dir, "refused.txt")
	for name, meta := range map[string]map[string]string{
		"a value not ASCII":     {"good": "caf\xc3\xa9"},
		"a key too long":        {strings.Repeat("k", maxMetaKey+1): "v"},
		"more than 4,096 bytes": {"a": strings.Repeat("x", 2000), "b": strings.Repeat("x", 2000), "c": strings.Repeat("x", 100)},
	} {
		if code, _, body := upload(refused, meta); code != http.StatusBadRequest || !strings.Contains(body, metaHeader) {
			t.Errorf("%s: %d %s, want 400 naming the header", name, code, body)
		}
	}
	if _, err := os.Stat(refused); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused upload wrote the file: %v", err)
	}
	// The bound is envd's: 4,096 bytes exactly is taken (stored where the
	// filesystem has room: tmpfs, the sandbox's; a 4 KiB ext4 block holds
	// less, a 507 as envd's).
	h := http.Header{}
	h.Set(metaHeader+"a", strings.Repeat("x", procs.MetaMax-2*len(procs.MetaPrefix+"a")-2000))
	h.Set(metaHeader+"b", strings.Repeat("x", 2000))
	if m, err := uploadMeta(h); err != nil || len(m) != 2 {
		t.Errorf("4,096 bytes of metadata exactly: %v, %v; want taken", m, err)
	}
	h.Set(metaHeader+"b", strings.Repeat("x", 2001))
	if _, err := uploadMeta(h); err == nil {
		t.Error("4,097 bytes of metadata taken")
	}
}

// TestFileMetadataWithoutXattrs: on a filesystem that keeps no user
// extended attributes (a ramfs here) an upload with metadata is a 400
// that says so and leaves no file, never a file whose metadata was
// dropped; one without metadata is written.
func TestFileMetadataWithoutXattrs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a ramfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("nsbox-test", dir, "ramfs", 0, ""); err != nil {
		t.Skipf("mount a ramfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	srv := newServer(t, &agentCore{a: hostAgent(t)})
	put := func(path string, meta string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/files?path="+path, strings.NewReader("content"))
		req.Header.Set("Content-Type", "application/octet-stream")
		if meta != "" {
			req.Header.Set(metaHeader+"author", meta)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	file := filepath.Join(dir, "a.txt")
	if code, body := put(file, "mish"); code != http.StatusBadRequest || !strings.Contains(body, "keeps no user extended attributes") || !strings.Contains(body, file) {
		t.Fatalf("upload with metadata to a ramfs: %d %s, want 400 saying the filesystem keeps no user xattrs", code, body)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused upload left its file: %v", err)
	}
	if code, body := put(file, ""); code != http.StatusOK {
		t.Fatalf("upload without metadata to a ramfs: %d %s, want 200", code, body)
	}
}
