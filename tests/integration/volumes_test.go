package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/daemon/volume"
)

// datasetOwner owns the test dataset on disk: no sandbox's host id, so
// only the idmapped mount makes its 0600 file readable inside.
const datasetOwner = 4242

// makeDataset makes <tmp>/secret (the host's) and <tmp>/ref, owned by
// datasetOwner: a 0600 file and symlinks to ../secret and /etc/hostname.
func makeDataset(t *testing.T) (dir, secret string) {
	t.Helper()
	root := t.TempDir()
	secret = filepath.Join(root, "secret")
	dir = filepath.Join(root, "ref")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "owned.txt")
	if err := os.WriteFile(f, []byte("dataset row"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, f} {
		if err := os.Chown(p, datasetOwner, datasetOwner); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"../secret", "up"}, {"/etc/hostname", "abs"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := container.IdmapSupported(dir); err != nil {
		t.Skipf("the filesystem of %s takes no idmapped mounts on this kernel (tmpfs does from Linux 6.3; set TMPDIR to ext4, xfs or btrfs): %v", dir, err)
	}
	return dir, secret
}

// requireVolumes skips t where named volumes cannot be made: no loop
// devices or no e2fsprogs (the cgroup v2 VM has no loop module).
func requireVolumes(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("named volumes need loop devices: %v", err)
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("named volumes need e2fsprogs: %v", err)
		}
	}
}

// startVolumeDaemon starts a daemon with the dataset "ref" and extra
// config; at cleanup, should the test stop before the daemon did, its
// volume mounts are detached so the temp dir can go.
func startVolumeDaemon(t *testing.T, dataset, extra string) *daemon {
	t.Helper()
	d := startDaemon(t, "--config", volumesConf(t, dataset, extra))
	t.Cleanup(func() {
		ents, _ := os.ReadDir(filepath.Join(d.runDir, "volumes"))
		for _, e := range ents {
			syscall.Unmount(filepath.Join(d.runDir, "volumes", e.Name()), syscall.MNT_DETACH)
		}
	})
	return d
}

func volumesConf(t *testing.T, dataset, extra string) string {
	t.Helper()
	return writeConf(t, fmt.Sprintf("[[datasets]]\nname = \"ref\"\npath = %q\n%s", dataset, extra))
}

// wantAPIError fails t unless err is an *agentapi.Error with status and a
// message containing each of says.
func wantAPIError(t *testing.T, what string, err error, status int, says ...string) {
	t.Helper()
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Status != status {
		t.Errorf("%s: err %v, want HTTP %d", what, err, status)
		return
	}
	for _, s := range says {
		if !strings.Contains(ae.Message, s) {
			t.Errorf("%s: message %q does not say %q", what, ae.Message, s)
		}
	}
}

// runPy runs Python code with the request's mounts set by tweak.
func runPyWith(t *testing.T, d *daemon, code string, tweak func(*agentapi.RunRequest)) *agentapi.RunResult {
	t.Helper()
	req := &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: code}
	tweak(req)
	res, err := d.client.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ok" {
		t.Fatalf("run: %s (exit %d): %s", res.Status, res.ExitCode, res.Stderr)
	}
	return res
}

// TestVolumes: a volume persists across sessions and a daemon restart, is
// owned by the sandbox user inside, enforces its size inside (ENOSPC) while
// the daemon keeps answering, is read-only when asked, cannot be deleted
// while mounted, and its file routes never follow a symlink planted
// inside; an unknown volume is a 404 saying how to make one; a stopped
// daemon leaves no loop device or mount behind.
func TestVolumes(t *testing.T) {
	requireVolumes(t)
	ds, _ := makeDataset(t)
	d := startVolumeDaemon(t, ds, "")
	ctx := context.Background()
	c := d.client

	v, err := c.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "data", SizeBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if v.SizeBytes != 16<<20 || v.InUse != 0 {
		t.Errorf("created %+v", v)
	}
	_, err = c.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "data", SizeBytes: 16 << 20})
	wantAPIError(t, "create twice", err, 409, "exists")
	wantCode(t, "create twice", err, 409, agentapi.CodeExists)
	_, err = c.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "small", SizeBytes: 1 << 20})
	wantAPIError(t, "too small", err, 400, "16 MiB")
	_, err = c.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "../x", SizeBytes: 16 << 20})
	wantAPIError(t, "bad name", err, 400)
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(info.Volumes) != "[data]" || fmt.Sprint(info.Datasets) != "[ref]" {
		t.Errorf("info: volumes %v, datasets %v", info.Volumes, info.Datasets)
	}

	// Unknown names: 404s that say what exists and how to make more.
	_, err = c.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Volumes: []agentapi.VolumeMount{{Name: "nope"}}})
	wantAPIError(t, "unknown volume", err, 404, `"nope"`, "nsbox volume create nope")
	_, err = c.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Datasets: []string{"nope"}})
	wantAPIError(t, "unknown dataset", err, 404, `"nope"`, "[ref]")
	_, err = c.CreateSession(ctx, &agentapi.SessionRequest{Volumes: []agentapi.VolumeMount{{Name: "nope"}}})
	wantAPIError(t, "session with an unknown volume", err, 404, "nope")
	_, err = c.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Volumes: []agentapi.VolumeMount{{Name: "data", Path: "/etc"}}})
	wantAPIError(t, "a path outside /mnt", err, 400, "/mnt/NAME")

	// A session writes, plants symlinks and sees its files as uid 1000.
	s1, err := c.CreateSession(ctx, &agentapi.SessionRequest{Volumes: []agentapi.VolumeMount{{Name: "data"}}})
	if err != nil {
		t.Fatal(err)
	}
	out := sessionOK(t, d, s1.ID, `
import os
open('/mnt/data/kept.txt', 'w').write('from session one')
os.symlink('/etc/passwd', '/mnt/data/abs')
os.symlink('../..', '/mnt/data/up')
os.mkdir('/mnt/data/dir')
os.symlink('/etc', '/mnt/data/dir/etc')
print(os.stat('/mnt/data/kept.txt').st_uid, os.stat('/mnt/data').st_uid)`)
	if out != "1000 1000" {
		t.Errorf("owners inside: %q, want 1000 1000", out)
	}
	// On the host the files are the on-disk owner's, no host account's.
	for _, p := range []string{"kept.txt", "dir", "."} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(d.runDir, "volumes", "data", p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != volume.DefaultOwnerID || st.Gid != volume.DefaultOwnerID {
			t.Errorf("%s on the host is %d:%d, want %d (volume.DefaultOwnerID)", p, st.Uid, st.Gid, volume.DefaultOwnerID)
		}
	}
	if v, err := c.Volume(ctx, "data"); err != nil || v.InUse != 1 {
		t.Errorf("volume while a session mounts it: %+v, %v", v, err)
	}
	err = c.DeleteVolume(ctx, "data")
	wantAPIError(t, "delete while mounted", err, 409, "in use")
	wantCode(t, "delete while mounted", err, 409, agentapi.CodeInUse)

	// The file API reads what the session wrote and follows no symlink.
	if got, err := c.GetVolumeFile(ctx, "data", "kept.txt"); err != nil || string(got) != "from session one" {
		t.Errorf("read through the API: %q, %v", got, err)
	}
	for _, p := range []string{"abs", "up/etc/passwd", "dir/etc/passwd", "../state", "/etc/passwd"} {
		got, err := c.GetVolumeFile(ctx, "data", p)
		if err == nil || bytes.Contains(got, []byte("root:")) {
			t.Errorf("GET volume file %q followed a symlink or escaped: %q, %v", p, got, err)
		}
	}
	if err := c.PutVolumeFile(ctx, "data", "dir/etc/evil", strings.NewReader("x")); err == nil {
		t.Error("PUT through a symlinked directory succeeded")
	}
	if err := c.PutVolumeFile(ctx, "data", "from-api.txt", strings.NewReader("from the API")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(d.runDir, "volumes", "data", "from-api.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != volume.DefaultOwnerID {
		t.Errorf("an API-written file on the host: %v %v, want owner %d", fi, err, volume.DefaultOwnerID)
	}
	list, err := c.VolumeFiles(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list.Files {
		names = append(names, f.Path)
		if f.Path == "abs" && (!f.Symlink || f.SymlinkTarget != "/etc/passwd") {
			t.Errorf("symlink listed as %+v", f)
		}
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "kept.txt") || !strings.Contains(got, "from-api.txt") || strings.Contains(got, "passwd") {
		t.Errorf("listing: %s", got)
	}
	if out := sessionOK(t, d, s1.ID, `import os; print(open('/mnt/data/from-api.txt').read(), os.stat('/mnt/data/from-api.txt').st_uid)`); out != "from the API 1000" {
		t.Errorf("an API-written file inside: %q", out)
	}
	if err := c.DeleteSession(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	waitVolumeFree(t, d, "data")

	// The sandbox's mountinfo names neither the volume's mount point nor
	// the rootfs store (a dataset stays a clone of its host directory, a
	// live view, and its path shows).
	mi := runPyWith(t, d, `print(open('/proc/self/mountinfo').read())`, func(r *agentapi.RunRequest) {
		r.Volumes = []agentapi.VolumeMount{{Name: "data"}}
		r.Datasets = []string{"ref"}
	})
	store, _ := testRootfs(t)
	for _, host := range []string{d.runDir, store} {
		if strings.Contains(mi.Stdout, host) {
			t.Errorf("mountinfo inside names the host path %s:\n%s", host, mi.Stdout)
		}
	}
	waitVolumeFree(t, d, "data")

	// A write past the cap fails inside with ENOSPC; the daemon answers.
	res := runPyWith(t, d, `
import errno
try:
    with open('/mnt/data/big', 'wb') as f:
        for _ in range(32):
            f.write(b'x' * (1 << 20))
            f.flush()
    print('wrote it all')
except OSError as e:
    print(errno.errorcode[e.errno], e.strerror)`, func(r *agentapi.RunRequest) { r.Volumes = []agentapi.VolumeMount{{Name: "data"}} })
	if got := strings.TrimSpace(res.Stdout); got != "ENOSPC No space left on device" {
		t.Errorf("writing 32 MiB into a 16 MiB volume: %q", got)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("daemon after a full volume: %v", err)
	}
	if err := c.DeleteVolumeFile(ctx, "data", "big"); err != nil {
		t.Fatal(err)
	}

	// Read-only at another path: reads work, writes are EROFS.
	res = runPyWith(t, d, `
import errno
print(open('/mnt/ro/kept.txt').read())
try:
    open('/mnt/ro/new', 'w')
except OSError as e:
    print(errno.errorcode[e.errno])`, func(r *agentapi.RunRequest) {
		r.Volumes = []agentapi.VolumeMount{{Name: "data", Path: "/mnt/ro", ReadOnly: true}}
	})
	if got := strings.TrimSpace(res.Stdout); got != "from session one\nEROFS" {
		t.Errorf("read-only volume: %q", got)
	}

	// A daemon restart keeps the volume; a new session reads it.
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	assertVolumesUnmounted(t, d)
	d.start(t)
	s2, err := c.CreateSession(ctx, &agentapi.SessionRequest{Volumes: []agentapi.VolumeMount{{Name: "data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if out := sessionOK(t, d, s2.ID, `print(open('/mnt/data/kept.txt').read())`); out != "from session one" {
		t.Errorf("after a restart: %q", out)
	}
	if err := c.DeleteSession(ctx, s2.ID); err != nil {
		t.Fatal(err)
	}
	waitVolumeFree(t, d, "data")
	if err := c.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Volume(ctx, "data")
	wantAPIError(t, "a deleted volume", err, 404)
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	assertVolumesUnmounted(t, d)
}

// TestDatasets: a dataset is readable inside as the sandbox user's, never
// writable (EROFS), and neither a symlink inside it nor .. from its mount
// reaches the host's files.
func TestDatasets(t *testing.T) {
	ds, secret := makeDataset(t)
	d := startVolumeDaemon(t, ds, "")
	res := runPyWith(t, d, `
import os, errno
d = '/mnt/ref'
st = os.stat(d + '/owned.txt')
print('owner', st.st_uid, st.st_gid)
print('read', open(d + '/owned.txt').read())
for p in ('/new', '/owned.txt'):
    try:
        open(d + p, 'a')
        print('write', p, 'ok')
    except OSError as e:
        print('write', p, errno.errorcode[e.errno])
for l in ('up', 'abs'):
    try:
        print(l, open(d + '/' + l).read().strip())
    except OSError as e:
        print(l, errno.errorcode[e.errno])
print('above', sorted(os.listdir(d + '/..')))
print('dotdot', os.path.exists(d + '/../secret'), os.path.exists(d + '/../../secret'))`, func(r *agentapi.RunRequest) { r.Datasets = []string{"ref"} })
	got := res.Stdout
	for _, want := range []string{
		"owner 1000 1000", "read dataset row", "write /new EROFS", "write /owned.txt EROFS",
		"up ENOENT", "abs sandbox", "above ['ref']", "dotdot False False",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("inside: no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "host secret") {
		t.Errorf("the sandbox read %s:\n%s", secret, got)
	}
	// Nothing was written to the host directory.
	if ents, _ := os.ReadDir(ds); len(ents) != 3 {
		t.Errorf("the dataset directory changed: %v", ents)
	}
}

// TestVolumesOnZygoteChildren: sessions and runs forked from a zygote get
// their volumes and datasets too.
func TestVolumesOnZygoteChildren(t *testing.T) {
	requireVolumes(t)
	name := dataSciRootfs(t)
	ds, _ := makeDataset(t)
	d := startVolumeDaemon(t, ds, fmt.Sprintf("[zygote]\nrootfs = [%q]\nchildren = 4\n", name))
	d.waitZygote(t, 0)
	ctx := context.Background()
	if _, err := d.client.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "zv", SizeBytes: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	s, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Rootfs: name, Volumes: []agentapi.VolumeMount{{Name: "zv"}}, Datasets: []string{"ref"}})
	if err != nil {
		t.Fatal(err)
	}
	out := sessionOK(t, d, s.ID, `
import os
open('/mnt/zv/z.txt', 'w').write('forked')
print(os.stat('/mnt/zv/z.txt').st_uid, open('/mnt/ref/owned.txt').read())`)
	if out != "1000 dataset row" {
		t.Errorf("zygote child session: %q", out)
	}
	res := runPyWith(t, d, `print(open('/mnt/zv/z.txt').read())`, func(r *agentapi.RunRequest) {
		r.Rootfs = name
		r.Volumes = []agentapi.VolumeMount{{Name: "zv", ReadOnly: true}}
	})
	if strings.TrimSpace(res.Stdout) != "forked" {
		t.Errorf("zygote child run: %q", res.Stdout)
	}
	d.client.DeleteSession(ctx, s.ID)
	d.checkForked(t, 2)
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	assertVolumesUnmounted(t, d)
}

// sessionOK runs code in session id and returns its trimmed stdout.
func sessionOK(t *testing.T, d *daemon, id, code string) string {
	t.Helper()
	res, err := d.client.Exec(context.Background(), id, &agentapi.ExecRequest{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ok" {
		t.Fatalf("exec: %s: %s %s", res.Status, res.Stderr, res.Error)
	}
	return strings.TrimSpace(res.Stdout)
}

// waitVolumeFree polls until no sandbox mounts volume name (a session's
// sandbox goes a moment after its DELETE is answered).
func waitVolumeFree(t *testing.T, d *daemon, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v, err := d.client.Volume(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if v.InUse == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("volume %s still in use: %+v", name, v)
		}
	}
}

// assertVolumesUnmounted fails t if a mount under the daemon's run dir, a
// sandbox cgroup or a loop device on one of its images is left after it
// stopped.
func assertVolumesUnmounted(t *testing.T, d *daemon) {
	t.Helper()
	if left := d.leftoverMounts(t); len(left) > 0 {
		t.Errorf("mounts left after the daemon stopped: %v", left)
	}
	if left := d.leftoverCgroups(t); len(left) > 0 {
		t.Errorf("cgroups left after the daemon stopped: %v", left)
	}
	state := filepath.Join(filepath.Dir(d.runDir), "state", "volumes")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		out, _ := exec.Command("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").Output()
		if !strings.Contains(string(out), state) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices left on %s:\n%s", state, out)
			return
		}
	}
}

// TestVolumeCLI: `nsbox volume` and --volume/--dataset as a user types
// them.
func TestVolumeCLI(t *testing.T) {
	requireVolumes(t)
	ds, _ := makeDataset(t)
	d := startVolumeDaemon(t, ds, "")
	sock := []string{"--socket", d.sock}
	cli := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := runCLI(t, stdin, args...)
		if code != 0 {
			t.Fatalf("nsbox %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	cli("", append([]string{"volume", "create", "cli", "--size", "16M"}, sock...)...)
	cli("from stdin", append([]string{"volume", "cp", "-", "cli:in/a.txt"}, sock...)...)
	out := cli("", append(append([]string{"exec"}, sock...), "--volume", "cli:/mnt/w", "--dataset", "ref", "--",
		"sh", "-c", "cat /mnt/w/in/a.txt; echo; cat /mnt/ref/owned.txt; echo; echo out > /mnt/w/b.txt")...)
	if out != "from stdin\ndataset row\n" {
		t.Errorf("exec with --volume and --dataset: %q", out)
	}
	if out := cli("", append([]string{"volume", "cp", "cli:b.txt", "-"}, sock...)...); out != "out\n" {
		t.Errorf("volume cp out: %q", out)
	}
	if out := cli("", append([]string{"volume", "ls"}, sock...)...); !strings.Contains(out, "cli") || !strings.Contains(out, "16 MiB") {
		t.Errorf("volume ls:\n%s", out)
	}
	if _, errOut, code := runCLI(t, "", append(append([]string{"exec"}, sock...), "--volume", "cli:/mnt/w", "--", "sh", "-c", "echo x > /mnt/w/c")...); code != 0 {
		t.Errorf("exec: %d %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "", append(append([]string{"exec"}, sock...), "--volume", "cli:ro", "--", "sh", "-c", "echo x > /mnt/cli/c")...); code == 0 || !strings.Contains(errOut, "Read-only file system") {
		t.Errorf("exec on a read-only volume: exit %d, %s", code, errOut)
	}
	cli("", append([]string{"volume", "rm", "cli"}, sock...)...)
	if out := cli("", append([]string{"volume", "ls"}, sock...)...); strings.Contains(out, "cli") {
		t.Errorf("volume ls after rm:\n%s", out)
	}
}

// TestVolumesBelongToTheirCaller: a volume belongs to the uid that made
// it, as a session does. Another local user who reaches the socket can
// neither list, read, write, mount nor delete it (not_found, as if it did
// not exist), nor take its name; root sees and mounts every volume with
// its owner. Through the CLI, as uid 65534.
func TestVolumesBelongToTheirCaller(t *testing.T) {
	requireVolumes(t)
	ds, _ := makeDataset(t)
	d := startVolumeDaemon(t, ds, "")
	ctx := context.Background()
	openToAll(t, d)
	bin := nsboxCopy(t)

	if _, err := d.client.CreateVolume(ctx, &agentapi.VolumeRequest{Name: "roots", SizeBytes: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := d.client.PutVolumeFile(ctx, "roots", "secret.txt", strings.NewReader("root-api-key-123")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"volume", "cp", "roots:secret.txt", "-"},
		{"volume", "cp", "-", "roots:planted.txt"},
		{"volume", "rm", "roots"},
		{"exec", "--volume", "roots", "--", "cat", "/mnt/roots/secret.txt"},
		{"session", "create", "--volume", "roots"},
	} {
		out, err := asNobody(t, bin, d, args...)
		if err == nil || strings.Contains(out, "root-api-key") || !strings.Contains(out, "not_found") {
			t.Errorf("nobody: nsbox %s: %v\n%s\nwant not_found and no secret", strings.Join(args, " "), err, out)
		}
	}
	if out, err := asNobody(t, bin, d, "volume", "create", "roots", "--size", "16M"); err == nil {
		t.Errorf("nobody takes the name of root's volume: %s", out)
	}
	if out, err := asNobody(t, bin, d, "volume", "ls", "--json"); err != nil || strings.Contains(out, "roots") {
		t.Errorf("nobody lists root's volume: %v\n%s", err, out)
	}
	if got, err := d.client.GetVolumeFile(ctx, "roots", "secret.txt"); err != nil || string(got) != "root-api-key-123" {
		t.Errorf("root's volume after nobody's tries: %q %v", got, err)
	}
	if _, err := d.client.GetVolumeFile(ctx, "roots", "planted.txt"); err == nil {
		t.Error("nobody planted a file in root's volume")
	}

	// Their own volume is theirs to use; root sees it with its owner.
	if out, err := asNobody(t, bin, d, "volume", "create", "theirs", "--size", "16M"); err != nil {
		t.Fatalf("volume create as nobody: %v\n%s", err, out)
	}
	if out, err := asNobody(t, bin, d, "exec", "--volume", "theirs", "--", "sh", "-c", "echo mine > /mnt/theirs/a.txt"); err != nil {
		t.Fatalf("nobody mounts its own volume: %v\n%s", err, out)
	}
	if out, err := asNobody(t, bin, d, "volume", "ls"); err != nil || !strings.Contains(out, "theirs") || !strings.Contains(out, "nobody") || strings.Contains(out, "roots") {
		t.Errorf("nobody's volume ls: %v\n%s\nwant its own volume, owned by nobody, only", err, out)
	}
	vols, err := d.client.Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]uint32{}
	for _, v := range vols {
		if v.OwnerUID != nil {
			owners[v.Name] = *v.OwnerUID
		}
	}
	if owners["roots"] != 0 || owners["theirs"] != nobody || len(owners) != 2 {
		t.Errorf("root lists owners %v, want roots: 0, theirs: %d", owners, nobody)
	}
	if got, err := d.client.GetVolumeFile(ctx, "theirs", "a.txt"); err != nil || string(got) != "mine\n" {
		t.Errorf("root reads nobody's volume: %q %v", got, err)
	}
	if out, err := asNobody(t, bin, d, "volume", "rm", "theirs"); err != nil {
		t.Errorf("nobody removes its own volume: %v\n%s", err, out)
	}
}

// TestDatasetOnAFilesystemWithoutIdmap: a dataset the kernel cannot mount
// in sandboxes (procfs takes no idmapped mounts) stops the daemon at start
// with the dataset's name and why, instead of failing every run that asks.
func TestDatasetOnAFilesystemWithoutIdmap(t *testing.T) {
	if buildErr != nil || nsboxBin == "" {
		t.Skip("requires root: the nsbox binary is built by TestMain as root")
	}
	dir := t.TempDir()
	conf := writeConf(t, "[[datasets]]\nname = \"procfs\"\npath = \"/proc/sys\"\n")
	store, name := testRootfs(t) // the daemon refuses to start without its default rootfs
	cmd := execNsbox("daemon", "--config", conf, "--socket", filepath.Join(dir, "s.sock"), "--state-dir", filepath.Join(dir, "state"),
		"--run-dir", filepath.Join(dir, "run"), "--rootfs-store", store, "--default-rootfs", name, "--cgroup-name", randomName("nsbox-it-"))
	done := make(chan struct{})
	time.AfterFunc(30*time.Second, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	if err == nil || !strings.Contains(string(out), "[[datasets]] procfs: /proc/sys cannot be mounted in sandboxes") {
		t.Fatalf("daemon with a procfs dataset: %v\n%s\nwant a refusal naming the dataset", err, out)
	}
}
