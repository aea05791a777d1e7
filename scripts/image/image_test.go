package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// staticBinary builds a tiny static program for the image's binaries.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// The same inputs give the same archive, byte for byte; another version
// gives another digest; the archive is an OCI layout whose image runs
// `nsbox daemon` and carries the labels.
func TestImageIsReproducible(t *testing.T) {
	bin := staticBinary(t)
	dir := t.TempDir()
	o := options{nsbox: bin, init: bin, name: "nsbox", version: "v1.2.3", revision: "abc", source: "https://example.org/nsbox",
		created: time.Unix(1700000000, 0).UTC()}
	var digests []string
	var archives [][]byte
	for i, v := range []string{"v1.2.3", "v1.2.3", "v1.2.4"} {
		o.version, o.out = v, filepath.Join(dir, v+"-"+string(rune('a'+i))+".tar")
		d, _, err := write(o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(o.out)
		if err != nil {
			t.Fatal(err)
		}
		digests, archives = append(digests, d.String()), append(archives, b)
	}
	if digests[0] != digests[1] || !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds of the same inputs differ: %s vs %s", digests[0], digests[1])
	}
	if digests[0] == digests[2] {
		t.Errorf("another version, the same digest %s", digests[0])
	}

	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archives[0]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(o.created) || h.Uid != 0 || h.Uname != "" {
			t.Errorf("%s: header not fixed: %v uid %d %q", h.Name, h.ModTime, h.Uid, h.Uname)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	m := index.Manifests[0]
	if m.Digest != digests[0] || m.Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" ||
		m.Annotations["io.containerd.image.name"] != "docker.io/library/nsbox:v1.2.3" {
		t.Errorf("index entry %+v, want digest %s and the names", m, digests[0])
	}
	var manifest struct {
		Config struct{ Digest string } `json:"config"`
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")], &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Created string `json:"created"`
		Config  struct {
			Entrypoint, Cmd []string
			Labels          map[string]string
		} `json:"config"`
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:")], &cfg); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != "/usr/local/bin/nsbox" || strings.Join(cfg.Config.Cmd, " ") != "daemon" ||
		cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" || cfg.Config.Labels["org.opencontainers.image.revision"] != "abc" ||
		cfg.Config.Labels["org.opencontainers.image.source"] != "https://example.org/nsbox" || cfg.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("image config: %+v", cfg)
	}
}

// A dynamically linked binary is refused: the image has no libc.
func TestImageRefusesDynamicBinaries(t *testing.T) {
	o := options{nsbox: "/bin/true", init: staticBinary(t), version: "x", out: filepath.Join(t.TempDir(), "i.tar")}
	if _, _, err := write(o); err == nil || !strings.Contains(err.Error(), "not a static ELF") {
		t.Fatalf("write with /bin/true = %v, want 'not a static ELF'", err)
	}
	o.nsbox = filepath.Join(t.TempDir(), "missing")
	if _, _, err := write(o); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("write with a missing binary = %v, want the make build hint", err)
	}
}

func TestParseCreated(t *testing.T) {
	for _, tc := range []struct{ flag, env, want string }{
		{"", "", "1970-01-01T00:00:00Z"},
		{"", "1700000000", "2023-11-14T22:13:20Z"},
		{"2026-01-02T03:04:05Z", "1700000000", "2026-01-02T03:04:05Z"},
	} {
		got, err := parseCreated(tc.flag, tc.env)
		if err != nil || got.Format(time.RFC3339) != tc.want {
			t.Errorf("parseCreated(%q, %q) = %v %v, want %s", tc.flag, tc.env, got, err, tc.want)
		}
	}
	if _, err := parseCreated("yesterday", ""); err == nil || !strings.Contains(err.Error(), "--created") {
		t.Errorf("parseCreated(yesterday) = %v, want an error naming --created", err)
	}
}
