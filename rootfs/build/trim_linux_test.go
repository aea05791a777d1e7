package build

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/rootfs"
	"golang.org/x/sys/unix"
)

func TestToPurge(t *testing.T) {
	installed := []rootfs.Package{{Name: "gcc-12"}, {Name: "python3"}, {Name: "perl"}, {Name: "libc6-dev"}}
	tests := []struct {
		name string
		want []string
		out  []string
	}{
		{"none wanted", nil, nil},
		{"only installed, in want order", []string{"perl", "gcc", "gcc-12", "libc6-dev"}, []string{"perl", "gcc-12", "libc6-dev"}},
		{"duplicates once", []string{"perl", "perl"}, []string{"perl"}},
		{"nothing installed", []string{"g++"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := toPurge(installed, tc.want); !slices.Equal(got, tc.out) {
				t.Errorf("toPurge = %v, want %v", got, tc.out)
			}
		})
	}
}

func TestProfilesKeepRuntime(t *testing.T) {
	// Shared libraries the datasci imports and node load at run time:
	// purging one would pass dpkg (--force-depends) and fail only at import
	// or at node's start.
	runtime := []string{
		"python3", "python3.11", "libpython3.11-stdlib", "libstdc++6", "libgcc-s1",
		"libgfortran5", "libquadmath0", "libgomp1", "libopenblas0-pthread",
		"liblapack3", "libblas3", "libxml2", "libicu72", "perl-base", "zlib1g", "libexpat1",
		// node's: libnode loads these, and Debian's node loads some of its
		// builtins (acorn, cjs-module-lexer, undici) from /usr/share/nodejs
		"libnode108", "libuv1", "libc-ares2", "libnghttp2-14", "libbrotli1", "libssl3",
		"node-acorn", "node-cjs-module-lexer", "node-undici", "node-busboy", "node-xtend",
		// git's and curl's (git-remote-http is libcurl3-gnutls's)
		"libpcre2-8-0", "libcurl4", "libcurl3-gnutls", "libssh2-1", "libpsl5",
		"librtmp1", "libldap-2.5-0", "libsasl2-2",
	}
	for name, p := range profiles() {
		for _, pkg := range p.purge {
			if slices.Contains(p.packages, pkg) || slices.Contains(runtime, pkg) {
				t.Errorf("profile %s purges %s, which it needs at run time", name, pkg)
			}
		}
	}
}

func TestMmdebstrapArgsExcludes(t *testing.T) {
	prof, err := lookupProfile("datasci")
	if err != nil {
		t.Fatal(err)
	}
	args := mmdebstrapArgs("/t", Options{Suite: "bookworm", Mirror: "http://m"}, prof)
	for _, want := range []string{
		"--dpkgopt=path-exclude=/usr/include/*",
		"--dpkgopt=path-exclude=/usr/lib/*.a",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %q", want, args)
		}
	}
	// dpkg applies filters in order: the include must follow the exclude.
	if slices.Index(args, "--dpkgopt=path-include=/usr/share/doc/*/copyright") < slices.Index(args, "--dpkgopt=path-exclude=/usr/share/doc/*") {
		t.Error("path-include comes before the path-exclude it overrides")
	}
	if got := args[len(args)-3:]; !slices.Equal(got, []string{"bookworm", "/t", "http://m"}) {
		t.Errorf("trailing args = %q", got)
	}
}

func TestHardenTree(t *testing.T) {
	tree := t.TempDir()
	mkfile := func(rel string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(tree, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	mkfile("usr/bin/su", 0o755|os.ModeSetuid)
	mkfile("usr/bin/chage", 0o755|os.ModeSetgid)
	mkfile("usr/bin/ls", 0o755)
	mkfile("tmp/sticky-file", 0o644|os.ModeSticky)
	if err := os.Symlink("/usr/bin/su", filepath.Join(tree, "usr/bin/su-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tree, "dev/pts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(tree, "dev/initctl"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantDevices := []string{"dev/initctl"}
	if os.Geteuid() == 0 {
		if err := unix.Mknod(filepath.Join(tree, "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		wantDevices = append(wantDevices, "dev/null")
	}
	setid, devices, err := hardenTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"usr/bin/chage", "usr/bin/su"}; !slices.Equal(setid, want) {
		t.Errorf("setid = %v, want %v", setid, want)
	}
	if !slices.Equal(devices, wantDevices) {
		t.Errorf("devices = %v, want %v", devices, wantDevices)
	}
	for rel, want := range map[string]os.FileMode{
		"usr/bin/su": 0o755, "usr/bin/chage": 0o755, "usr/bin/ls": 0o755,
		"tmp/sticky-file": 0o644 | os.ModeSticky,
	} {
		st, err := os.Lstat(filepath.Join(tree, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != want {
			t.Errorf("%s mode = %v, want %v", rel, got, want)
		}
	}
	for _, d := range wantDevices {
		if _, err := os.Lstat(filepath.Join(tree, d)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(tree, "dev/pts")); err != nil {
		t.Errorf("dev/pts dir removed: %v", err)
	}
	// Idempotent: a second pass finds nothing.
	setid, devices, err = hardenTree(tree)
	if err != nil || len(setid) != 0 || len(devices) != 0 {
		t.Errorf("second pass: %v %v %v", setid, devices, err)
	}
}

func TestSitecustomizePath(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, tree string)
		want    string
		wantErr bool
	}{
		{"debian link to /etc", func(t *testing.T, tree string) {
			writeTreeFile(t, tree, "etc/python3.11/sitecustomize.py", "")
			symlinkInTree(t, tree, "/etc/python3.11/sitecustomize.py", "usr/lib/python3.11/sitecustomize.py")
		}, "etc/python3.11/sitecustomize.py", false},
		{"relative link", func(t *testing.T, tree string) {
			writeTreeFile(t, tree, "etc/python3.11/sitecustomize.py", "")
			symlinkInTree(t, tree, "../../../etc/python3.11/sitecustomize.py", "usr/lib/python3.11/sitecustomize.py")
		}, "etc/python3.11/sitecustomize.py", false},
		{"plain file", func(t *testing.T, tree string) {
			writeTreeFile(t, tree, "usr/lib/python3.11/sitecustomize.py", "")
		}, "usr/lib/python3.11/sitecustomize.py", false},
		{"none", func(t *testing.T, tree string) {
			writeTreeFile(t, tree, "usr/lib/python3.11/os.py", "")
		}, "usr/lib/python3/dist-packages/sitecustomize.py", false},
		{"dangling link", func(t *testing.T, tree string) {
			symlinkInTree(t, tree, "/etc/python3.11/sitecustomize.py", "usr/lib/python3.11/sitecustomize.py")
		}, "", true},
		{"link out of the tree", func(t *testing.T, tree string) {
			symlinkInTree(t, tree, "../../../../../../etc/passwd", "usr/lib/python3.11/sitecustomize.py")
		}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree := t.TempDir()
			tc.setup(t, tree)
			got, err := sitecustomizePath(tree)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("sitecustomizePath = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestFontCacheHook runs the sitecustomize stanza with the host's python3.
func TestFontCacheHook(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 on the host")
	}
	const prebuilt, stale = `{"_version": 330}`, `{"_version": 1}`
	tests := []struct {
		name     string
		env      []string // HOME is added; @ stands for HOME
		withSrc  bool
		existing bool   // the target already has a cache: kept as is
		want     string // dir under HOME that must hold the cache; "" for none
	}{
		{"default ~/.cache", nil, true, false, ".cache/matplotlib"},
		{"XDG_CACHE_HOME", []string{"XDG_CACHE_HOME=@/xdg"}, true, false, "xdg/matplotlib"},
		{"MPLCONFIGDIR wins", []string{"XDG_CACHE_HOME=@/xdg", "MPLCONFIGDIR=@/mpl"}, true, false, "mpl"},
		{"existing cache kept", nil, true, true, ".cache/matplotlib"},
		{"no prebuilt cache", nil, false, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home, src := t.TempDir(), filepath.Join(t.TempDir(), "matplotlib")
			if tc.withSrc {
				writeTreeFile(t, src, "fontlist-v330.json", prebuilt)
			}
			want := prebuilt
			if tc.existing {
				writeTreeFile(t, home, tc.want+"/fontlist-v330.json", stale)
				want = stale
			}
			hook := strings.Replace(fontCacheHook, fontCacheDir, src, 1)
			env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
			for _, kv := range tc.env {
				env = append(env, strings.Replace(kv, "@", home, 1))
			}
			// Other imports leave HOME alone; "import matplotlib" seeds the
			// cache (and fails on a host without matplotlib: no matter) and
			// takes the finder off sys.meta_path.
			script := hook + `
import os, sys, json, email.parser
before = sorted(os.listdir(os.environ["HOME"]))
try:
    import matplotlib
except ImportError:
    pass
assert not any(getattr(f, "__name__", "") == "_NsboxMplCacheSeed" for f in sys.meta_path)
print(" ".join(before))
`
			cmd := exec.Command(py, "-I", "-c", script)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("hook: %v: %s", err, out)
			}
			if before := strings.TrimSpace(string(out)); !tc.existing && before != "" {
				t.Errorf("HOME before import matplotlib: %q, want empty", before)
			}
			var files []string
			filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(home, p)
					files = append(files, rel)
				}
				return nil
			})
			var wantFiles []string
			if tc.want != "" {
				wantFiles = []string{tc.want + "/fontlist-v330.json"}
				b, err := os.ReadFile(filepath.Join(home, wantFiles[0]))
				if err != nil || string(b) != want {
					t.Errorf("cache = %q, %v; want %q", b, err, want)
				}
			}
			if !slices.Equal(files, wantFiles) {
				t.Errorf("files under HOME = %v, want %v", files, wantFiles)
			}
		})
	}
}

func writeTreeFile(t *testing.T, tree, rel, data string) {
	t.Helper()
	p := filepath.Join(tree, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlinkInTree(t *testing.T, tree, target, rel string) {
	t.Helper()
	p := filepath.Join(tree, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
