package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// fillVolumeCode writes a repeating 1 MiB block to /mnt/data/blob until
// the volume says ENOSPC, fsyncs and syncs, and prints the bytes written
// and their sha256; any other error fails the run.
const fillVolumeCode = `
import errno, hashlib, os
block = bytes((i * 7 + (i >> 8)) & 255 for i in range(1 << 20))
h, n = hashlib.sha256(), 0
fd = os.open('/mnt/data/blob', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
try:
    while True:
        w = os.write(fd, block)
        h.update(block[:w])
        n += w
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
os.fsync(fd)
os.close(fd)
os.sync()
print(n, h.hexdigest())`

// hashVolumeCode prints the size and sha256 of /mnt/data/blob.
const hashVolumeCode = `
import hashlib
b = open('/mnt/data/blob', 'rb').read()
print(len(b), hashlib.sha256(b).hexdigest())`

// TestVolumeOnAFullHostDisk: with <state_dir>/volumes on a small disk, a
// volume larger than the disk's free space is refused at create (507
// no_space, naming the free space); once another writer has filled the
// disk, a sandbox still writes its volume full, every write and fsync
// saying the truth (ENOSPC only at the volume's own cap), and the bytes
// are all there after a daemon restart. With sparse images the sandbox
// was told yes while the loop device's writes were lost.
func TestVolumeOnAFullHostDisk(t *testing.T) {
	requireVolumes(t)
	state := t.TempDir()
	disk := filepath.Join(state, "volumes")
	if err := os.Mkdir(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=160m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	d := startDaemon(t, "--state-dir", state)
	t.Cleanup(func() {
		ents, _ := os.ReadDir(filepath.Join(d.runDir, "volumes"))
		for _, e := range ents {
			syscall.Unmount(filepath.Join(d.runDir, "volumes", e.Name()), syscall.MNT_DETACH)
		}
	})
	ctx := context.Background()

	_, err := d.client.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "huge", SizeBytes: 256 << 20})
	wantCode(t, "a volume larger than the disk", err, 507, agentapi.CodeNoSpace)
	wantAPIError(t, "a volume larger than the disk", err, 507, "bytes free")
	if _, err := d.client.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "data", SizeBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}

	f, err := os.Create(filepath.Join(disk, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for block := make([]byte, 1<<20); err == nil; {
		_, err = f.Write(block)
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the host disk: %v", err)
	}

	mount := func(r *agentapi.RunRequest) { r.Volumes = []agentapi.VolumeMount{{Name: "data"}} }
	wrote := strings.TrimSpace(runPyWith(t, d, fillVolumeCode, mount).Stdout)
	var n int64
	if _, err := fmt.Sscan(wrote, &n); err != nil || n < 100<<20 {
		t.Fatalf("the sandbox wrote %q into a 128 MiB volume on a full host disk, want over 100 MiB", wrote)
	}
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	if got := strings.TrimSpace(runPyWith(t, d, hashVolumeCode, mount).Stdout); got != wrote {
		t.Errorf("after a restart the volume holds %q, the sandbox wrote %q", got, wrote)
	}
}
