package build

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeTree returns a tree with node and esbuild (NSBOX_TEST_NODE_ROOTFS, else
// the store's data-science rootfs), skipping when there is none.
func nodeTree(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("requires root: chroot")
	}
	dir := os.Getenv("NSBOX_TEST_NODE_ROOTFS")
	if dir == "" {
		store, name := os.Getenv("NSBOX_TEST_ROOTFS_STORE"), os.Getenv("NSBOX_TEST_DATASCI_ROOTFS_NAME")
		if store == "" {
			store = "/var/lib/nsbox/rootfs"
		}
		if name == "" {
			name = "default"
		}
		dir = filepath.Join(store, name, "rootfs")
	}
	for _, p := range []string{"usr/bin/node", "usr/bin/esbuild"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Skipf("no tree with node and esbuild at %s (make rootfs-default builds the datasci profile, which has them; or set NSBOX_TEST_NODE_ROOTFS): %v", dir, err)
		}
	}
	return dir
}

func TestCheckNode(t *testing.T) {
	tree := nodeTree(t)
	prof, err := lookupProfile("datasci")
	if err != nil {
		t.Fatal(err)
	}
	if !prof.has("nodejs") || !prof.has("esbuild") {
		t.Fatal("the datasci profile lacks nodejs or esbuild")
	}
	if err := checkNode(context.Background(), tree, prof); err != nil {
		t.Fatalf("checkNode on %s: %v", tree, err)
	}
}

// A tree without node, acorn or esbuild fails the check, saying which.
func TestCheckNodeFails(t *testing.T) {
	full := nodeTree(t)
	prof, _ := lookupProfile("datasci")
	noNode := t.TempDir()
	noAcorn := copyNode(t, full, "acorn")
	noEsbuild := copyNode(t, full, "")
	for _, tc := range []struct {
		name, tree, want string
	}{
		{"no node", noNode, "node -e requiring acorn"},
		{"no acorn", noAcorn, "/usr/share/nodejs/acorn"},
		{"no esbuild", noEsbuild, "esbuild --loader=ts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkNode(context.Background(), tc.tree, prof)
			if !errors.Is(err, ErrBuildFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBuildFailed naming %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// copyNode copies node, the libraries it loads (as ldd lists them in src)
// and Debian's module dir /usr/share/nodejs but its subdir without into a
// new tree; never esbuild. (Debian's node loads some of its builtins from
// that dir, acorn and cjs-module-lexer among them: it aborts at start
// without one.)
func copyNode(t *testing.T, src, without string) string {
	t.Helper()
	dst := t.TempDir()
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if target, err := os.Readlink(filepath.Join(src, l)); err == nil {
			if err := os.MkdirAll(filepath.Join(dst, "usr", l), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(dst, l)); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := exec.Command("chroot", src, "/usr/bin/ldd", "/usr/bin/node").Output()
	if err != nil {
		t.Fatalf("ldd node in %s: %v", src, err)
	}
	files := []string{"/usr/bin/node"}
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	filepath.WalkDir(filepath.Join(src, "usr/share/nodejs"), func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && d.Name() == without:
			return filepath.SkipDir
		case d.Type().IsRegular():
			files = append(files, strings.TrimPrefix(p, src))
		}
		return nil
	})
	for _, f := range files {
		copyFile(t, filepath.Join(src, f), filepath.Join(dst, f))
	}
	return dst
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
