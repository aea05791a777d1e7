package client

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestDialErrorsNameTheCause: a request that cannot reach the daemon says
// why in the user's terms, not only "connect: …".
func TestDialErrorsNameTheCause(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nothing listens
	for _, tc := range []struct {
		name, socket, want string
	}{
		{"missing", filepath.Join(dir, "none.sock"), "no socket there: start the daemon"},
		{"stale", stale, "nothing listens on it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Client{Socket: tc.socket}).Health(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.socket) {
				t.Errorf("err = %v, want it to name %s and say %q", err, tc.socket, tc.want)
			}
		})
	}
	// The permission case needs another uid: tests/integration's
	// TestSessionsBelongToTheirCaller covers it.
}
