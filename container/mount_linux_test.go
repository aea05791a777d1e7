package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// diskOwner is the on-disk owner of the test's host directories: no
// sandbox's host id, so only the idmap can make them the sandbox user's.
const diskOwner = 4242

// hostTree makes <tmp>/secret (the host's, outside the mount) and
// <tmp>/data owned by diskOwner with a 0600 file, a symlink to ../secret
// and one to /etc/hostname; it returns the data directory.
func hostTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(data, "owned.txt")
	if err := os.WriteFile(f, []byte("only the owner reads this"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"../secret", "up"}, {"/etc/hostname", "abs"}} {
		if err := os.Symlink(l[0], filepath.Join(data, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{data, f} {
		if err := os.Chown(p, diskOwner, diskOwner); err != nil {
			t.Fatal(err)
		}
	}
	if err := IdmapSupported(data); err != nil {
		t.Skipf("the filesystem of %s takes no idmapped mounts on this kernel (tmpfs does from Linux 6.3; set TMPDIR to ext4, xfs or btrfs): %v", data, err)
	}
	return data
}

// mountProbe reads the mount inside and reports what it saw, one fact a
// line: the owner of a 0600 file and its content, a write's errno, where
// the symlinks lead, what is above the mount.
const mountProbe = `
import os, errno
d = '/mnt/data'
st = os.stat(d + '/owned.txt')
print('uid', st.st_uid, st.st_gid)
print('read', open(d + '/owned.txt').read())
try:
    open(d + '/new.txt', 'w').write('from inside')
    print('write ok', os.stat(d + '/new.txt').st_uid)
except OSError as e:
    print('write', errno.errorcode[e.errno])
for l in ('up', 'abs'):
    try:
        print(l, open(d + '/' + l).read().strip())
    except OSError as e:
        print(l, errno.errorcode[e.errno])
print('above', sorted(os.listdir(d + '/..')))
try:
    os.mkdir('/mnt/other')
    print('mkdir /mnt ok')
except OSError as e:
    print('mkdir /mnt', errno.errorcode[e.errno])
`

func TestMountsReadOnlyIdmapped(t *testing.T) {
	e := newTestEngine(t)
	data := hostTree(t)
	for _, k := range sandboxKinds(t, e) {
		t.Run(k.name, func(t *testing.T) {
			out := runMount(t, k, Mount{Source: data, Target: "/mnt/data", ReadOnly: true, NoExec: true, OwnerUID: diskOwner, OwnerGID: diskOwner})
			for _, want := range []string{
				"uid 1000 1000",                  // idmapped: the on-disk owner is the sandbox user
				"read only the owner reads this", // and may read its 0600 file
				"write EROFS",                    // read-only
				"up ENOENT",                      // ../secret resolves in the sandbox: /mnt/secret
				"abs sandbox",                    // /etc/hostname is the sandbox's own
				"above ['data']",                 // .. of the mount is the sandbox's /mnt
				"mkdir /mnt EROFS",               // /mnt itself is read-only
			} {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("inside the sandbox: no %q in:\n%s", want, out)
				}
			}
			if strings.Contains(out, "host secret") {
				t.Errorf("the sandbox read the host's file:\n%s", out)
			}
		})
	}
}

func TestMountsReadWriteOwnedOnDisk(t *testing.T) {
	e := newTestEngine(t)
	data := hostTree(t)
	for _, k := range sandboxKinds(t, e) {
		t.Run(k.name, func(t *testing.T) {
			os.Remove(filepath.Join(data, "new.txt"))
			out := runMount(t, k, Mount{Source: data, Target: "/mnt/data", OwnerUID: diskOwner, OwnerGID: diskOwner})
			if !strings.Contains(out, "write ok 1000\n") {
				t.Fatalf("inside: no write:\n%s", out)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(data, "new.txt"), &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != diskOwner || st.Gid != diskOwner {
				t.Errorf("new.txt on disk is owned by %d:%d, want %d:%d (the mount's owner)", st.Uid, st.Gid, diskOwner, diskOwner)
			}
		})
	}
}

// runMount runs mountProbe with m and returns its stdout.
func runMount(t *testing.T, k sandboxKind, m Mount) string {
	t.Helper()
	sb, err := k.start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", mountProbe}, Mounts: []Mount{m}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusOK {
		t.Fatalf("status %s, stderr:\n%s", res.Status, res.Stderr)
	}
	return string(res.Stdout)
}

func TestMountsRefuseBadTargets(t *testing.T) {
	e := newTestEngine(t)
	src := t.TempDir()
	for _, target := range []string{"/etc", "/mnt", "/mnt/", "/mnt/..", "/mnt/.x", "/mnt/a/b", "/mnt/A", "mnt/a", "/mnt/a/"} {
		_, err := e.Start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"true"}, Mounts: []Mount{{Source: src, Target: target}}})
		if !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("target %q: err %v, want ErrInvalidSpec", target, err)
		}
	}
	two := []Mount{{Source: src, Target: "/mnt/a"}, {Source: src, Target: "/mnt/a"}}
	if _, err := e.Start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"true"}, Mounts: two}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("the same target twice: err %v, want ErrInvalidSpec", err)
	}
}

func TestMountNames(t *testing.T) {
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"/mnt/data", true}, {"/mnt/a.b_c-1", true}, {"/mnt/0", true},
		{"/mnt/..", false}, {"/mnt/.", false}, {"/mnt/-a", false}, {"/mnt/a b", false},
		{"/mnt//a", false}, {"/home/a", false}, {"/mnt/" + strings.Repeat("a", 64), false},
	} {
		t.Run(tc.target, func(t *testing.T) {
			_, err := MountName(tc.target)
			if (err == nil) != tc.ok {
				t.Errorf("MountName(%q) = %v, want ok=%v", tc.target, err, tc.ok)
			}
		})
	}
}

// BenchmarkStartWithMount: a run of `true` with no mount, with one
// idmapped mount (the userns cached after the first) and with two; the
// difference is what mounts add to a sandbox's start.
func BenchmarkStartWithMount(b *testing.B) {
	e := newTestEngine(b)
	root := testenv.Rootfs(b)
	src := b.TempDir()
	for _, n := range []int{0, 1, 2} {
		var ms []Mount
		for i := range n {
			ms = append(ms, Mount{Source: src, Target: fmt.Sprintf("/mnt/m%d", i), ReadOnly: true, OwnerUID: diskOwner, OwnerGID: diskOwner})
		}
		b.Run(fmt.Sprintf("mounts=%d", n), func(b *testing.B) {
			for b.Loop() {
				res, err := e.Run(context.Background(), Spec{RootfsDir: root, Argv: []string{"true"}, Mounts: ms})
				if err != nil || res.Status != StatusOK {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}

// FuzzMountName: whatever a request says, a target that passes is
// exactly /mnt/NAME with NAME one plain path element.
func FuzzMountName(f *testing.F) {
	for _, s := range []string{"/mnt/data", "/mnt/..", "/mnt/a/b", "/mnt//a", "/etc", "/mnt/a\x00", "/mnt/."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		name, err := MountName(target)
		if err != nil {
			return
		}
		if target != MountDir+"/"+name || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || filepath.Clean(target) != target {
			t.Fatalf("MountName(%q) = %q", target, name)
		}
	})
}

// TestMountinfoHidesHostPaths: the sandbox's /proc/self/mountinfo names
// no host path: not the rootfs's directory (a bind's root field would be
// /var/lib/nsbox/rootfs/NAME/rootfs), not a read-only mount's source (a
// dataset's directory); both are overlays whose root is "/".
func TestMountinfoHidesHostPaths(t *testing.T) {
	e := newTestEngine(t)
	data := hostTree(t)
	rootfs := testenv.Rootfs(t)
	const code = "print(open('/proc/self/mountinfo').read())"
	for _, k := range sandboxKinds(t, e) {
		t.Run(k.name, func(t *testing.T) {
			m := Mount{Source: data, Target: "/mnt/data", ReadOnly: true, NoExec: true, OwnerUID: diskOwner, OwnerGID: diskOwner}
			s := Spec{RootfsDir: rootfs, Argv: []string{"python3", "-c", code}, Mounts: []Mount{m}}
			sb, err := k.start(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			res, err := sb.Wait()
			if err != nil || res.Status != StatusOK {
				t.Fatalf("%v %v:\n%s", err, res, res.Stderr)
			}
			out := string(res.Stdout)
			// The rootfs only: a dataset stays a clone of its host
			// directory (a live view), whose path shows.
			for _, host := range []string{rootfs, "/var/lib/nsbox"} {
				if strings.Contains(out, host) {
					t.Errorf("mountinfo names the host path %s:\n%s", host, out)
				}
			}
			roots := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 4 {
					roots[f[4]] = f[3]
				}
			}
			for _, p := range []string{"/"} {
				if roots[p] != "/" {
					t.Errorf("the mount at %s has root %q, want \"/\":\n%s", p, roots[p], out)
				}
			}
		})
	}
}
