package sandboxinit

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// inMountNS runs f on a thread of its own in a private mount namespace, as
// init's mounts are; the thread exits with it, so nothing reaches the host.
func inMountNS(t testing.TB, f func()) {
	t.Helper()
	testenv.RequireRoot(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make / private: %v", err)
			return
		}
		f()
	}()
	<-done
}

// fakeRoot makes a rootfs-shaped directory with a tmpfs workspace and the
// given extra entries ("home/", "home/user/", "home -> elsewhere").
func fakeRoot(t testing.TB, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", ws, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		var err error
		if d == "home -> elsewhere" {
			err = os.Symlink(t.TempDir(), filepath.Join(root, "home"))
		} else {
			err = os.Mkdir(filepath.Join(root, d), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestMountHome(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dirs  []string
		bound bool
	}{
		{"empty home", []string{"home/"}, true},
		{"home/user in the rootfs", []string{"home/", "home/user/"}, true},
		{"no home", nil, false},
		{"home is a symlink", []string{"home -> elsewhere"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inMountNS(t, func() {
				root := fakeRoot(t, tc.dirs...)
				if err := mountHome(root); err != nil {
					t.Errorf("mountHome: %v", err)
					return
				}
				err := os.WriteFile(filepath.Join(root, "home/user/x"), []byte("x"), 0o644)
				if !tc.bound {
					if err == nil {
						t.Error("wrote home/user/x with nothing bound there")
					}
					return
				}
				if err != nil {
					t.Errorf("write home/user/x: %v", err)
					return
				}
				if b, err := os.ReadFile(filepath.Join(root, "workspace/x")); err != nil || string(b) != "x" {
					t.Errorf("workspace/x = %q, %v", b, err)
				}
				var sfs unix.Statfs_t
				if err := unix.Statfs(filepath.Join(root, "home"), &sfs); err != nil {
					t.Error(err)
				} else if len(tc.dirs) == 1 && sfs.Flags&unix.ST_RDONLY == 0 {
					t.Error("the /home tmpfs is writable")
				}
			})
		})
	}
}

// BenchmarkMountHome is what /home/user adds to every sandbox's start:
// the tmpfs on /home, its mkdir, the bind and the read-only remount
// ("tmpfs"), or the bind alone on a rootfs that has /home/user ("bind").
func BenchmarkMountHome(b *testing.B) {
	for _, bc := range []struct {
		name string
		dirs []string
	}{{"tmpfs", []string{"home/"}}, {"bind", []string{"home/", "home/user/"}}} {
		b.Run(bc.name, func(b *testing.B) {
			inMountNS(b, func() {
				root := fakeRoot(b, "home/")
				if len(bc.dirs) == 2 {
					os.Mkdir(filepath.Join(root, "home/user"), 0o755)
				}
				home, user := filepath.Join(root, "home"), filepath.Join(root, "home/user")
				b.ResetTimer()
				for range b.N {
					if err := mountHome(root); err != nil {
						b.Error(err)
						return
					}
					b.StopTimer()
					unix.Unmount(user, unix.MNT_DETACH)
					if len(bc.dirs) == 1 {
						unix.Unmount(home, unix.MNT_DETACH)
					}
					b.StartTimer()
				}
			})
		})
	}
}
