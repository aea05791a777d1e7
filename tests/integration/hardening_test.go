package integration

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// emulateUnit reproduces, in a private mount namespace, the file-system
// hardening of scripts/systemd/nsbox.service (ProtectSystem=strict with the
// State/Runtime directories writable, ProtectHome=yes, PrivateTmp=yes,
// NoNewPrivileges=yes) and then runs "$@". extra runs before the exec.
const emulateUnit = `set -e
mount --make-rslave /
awk '{print $5}' /proc/self/mountinfo | sort -u | while read m; do
  case "$m" in /proc*|/sys*|/dev*) continue;; esac
  mount -o remount,bind,ro "$m" 2>/dev/null || true
done
for d in /var/lib/nsbox /run/nsbox "$STORE"; do
  mkdir -p "$d" 2>/dev/null || true
  mount --rbind "$d" "$d" && mount -o remount,bind,rw "$d"
done
mount -t tmpfs -o mode=1777 tmpfs /tmp
for d in /root /home; do
  [ -d "$d" ] && mount -t tmpfs -o ro,mode=0755 tmpfs "$d"
done
if touch /usr/.nsbox-hardening-probe 2>/dev/null; then rm -f /usr/.nsbox-hardening-probe; echo "/usr is writable: emulation failed"; exit 3; fi
eval "$EXTRA"
exec setpriv --no-new-privs "$@"
`

// TestSandboxUnderUnitHardening: sandboxes run under the unit's file-system
// hardening, and the protections the unit leaves out for a reason
// (ProtectKernelTunables, which over-mounts /proc/sys) would break them.
func TestSandboxUnderUnitHardening(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: mount namespaces and sandboxes")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("requires %s (util-linux): %v", tool, err)
		}
	}
	store, name := testRootfs(t)
	// PrivateTmp hides /tmp, where TestMain built the binary: copy it to /run.
	bin := filepath.Join("/run", randomName("nsbox-it-bin-"))
	copyFile(t, nsboxBin, bin)
	t.Cleanup(func() { os.Remove(bin) })

	tests := []struct {
		name    string
		extra   string
		wantErr string // "" when the sandbox must work
	}{
		{"as shipped", "", ""},
		{"with ProtectKernelTunables", "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys", "mount /proc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("unshare", "-m", "sh", "-c", emulateUnit, "sh", bin, "exec", "--rootfs", name, "--",
				"python3", "-c", `import os, socket; socket.socket().bind(("127.0.0.1", 0)); print("ok", os.getuid())`)
			cmd.Env = append(os.Environ(), "STORE="+store, "NSBOX_ROOTFS_STORE="+store, "EXTRA="+tc.extra)
			out, err := cmd.CombinedOutput()
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(string(out), "ok 1000") {
					t.Errorf("sandbox under the unit's hardening: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tc.wantErr) {
				t.Errorf("err %v, output %q; want a failure mentioning %q", err, out, tc.wantErr)
			}
		})
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
