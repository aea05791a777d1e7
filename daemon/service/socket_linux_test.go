package service

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon gives its socket to root (and group nsbox)")
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) // what is at path before; nil: not even its directory
		wantErr string                          // "" when listenSocket serves path
	}{
		{name: "new path in a new directory"},
		{name: "stale socket of a dead daemon", prepare: func(t *testing.T, path string) {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			ln.Close()
		}},
		{name: "a file that is not a socket", wantErr: "is not a socket", prepare: func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a live listener without the lock", wantErr: "another nsbox daemon is serving", prepare: func(t *testing.T, path string) {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}},
		{name: "another daemon's lock", wantErr: ".lock); stop it first", prepare: func(t *testing.T, path string) {
			lock, err := lockSocket(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lock.Close() })
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			path := filepath.Join(dir, "nsbox.sock")
			if tc.prepare != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				tc.prepare(t, path)
			}
			ln, lock, err := listenSocket(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("listenSocket: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			defer ln.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o660 {
				t.Errorf("socket mode %v, want 0660", fi.Mode().Perm())
			}
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatalf("dialing the new socket: %v", err)
			}
			c.Close()
			if _, _, err := listenSocket(path); err == nil || !strings.Contains(err.Error(), "another nsbox daemon") {
				t.Errorf("second listenSocket: %v, want a refusal", err)
			}
		})
	}
}

// TestDaemonListenerNotActivated: without LISTEN_FDS the daemon listens
// on its path itself.
func TestDaemonListenerNotActivated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: the daemon gives its socket to root (and group nsbox)")
	}
	t.Setenv("LISTEN_FDS", "")
	path := filepath.Join(t.TempDir(), "nsbox.sock")
	ln, lock, activated, err := daemonListener(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	defer ln.Close()
	if activated || ln.Addr().String() != path {
		t.Errorf("daemonListener = %s, activated %v; want %s, not activated", ln.Addr(), activated, path)
	}
}
