// Package image runs nsbox's container image the way the Kubernetes
// DaemonSet (scripts/k8s/nsbox-daemonset.yaml) runs it: the init
// container's command, then the daemon's, privileged, with the socket
// directory and the rootfs store as host mounts and the ConfigMap's
// nsbox.conf, under rootful podman with runc. It then drives that daemon
// through its socket from the host, as an agent pod on the node would.
//
// `make test-image` builds the image (make image), installs podman and
// runs it; without NSBOX_TEST_IMAGE the test skips.
package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// podman runs podman on a private store under dir: its images, containers
// and state live there and nowhere else (vfs: no overlay mounts to leave).
type podman struct {
	t    *testing.T
	base []string
}

func newPodman(t *testing.T, dir string) *podman {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed: make test-image installs it (apt-get install podman)")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed (apt-get install runc)")
	}
	// crun refuses this host's hybrid cgroup layout; runc runs it. Root here
	// lacks CAP_SYS_RESOURCE, so the run's ulimits stay at the host's.
	return &podman{t: t, base: []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "runroot"),
		"--tmpdir", filepath.Join(dir, "tmp"), "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc"}}
}

// run runs podman args and returns its stdout; a failure is fatal unless
// allowFail.
func (p *podman) run(allowFail bool, args ...string) (string, error) {
	p.t.Helper()
	cmd := exec.Command("podman", append(append([]string{}, p.base...), args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil && !allowFail {
		p.t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String() + errb.String(), err
}

// daemonSet reads the DaemonSet and its ConfigMap's nsbox.conf from the
// manifest.
func daemonSet(t *testing.T) (ds *appsv1.DaemonSet, conf string) {
	t.Helper()
	data, err := os.ReadFile("../../scripts/k8s/nsbox-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			if err := yaml.Unmarshal(doc, ds); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(doc, &cm); err != nil {
				t.Fatal(err)
			}
			conf = cm.Data["nsbox.conf"]
		}
	}
	if ds == nil || conf == "" {
		t.Fatal("the manifest has no DaemonSet or no nsbox.conf")
	}
	return ds, conf
}

// unmountUnder lazily unmounts what is still mounted under dir (podman's
// own, if a step failed half-way), deepest first.
func unmountUnder(t *testing.T, dir string) {
	mounts := testdaemon.Mounts(t, dir)
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = exec.Command("umount", "-l", mounts[i]).Run()
	}
}

func TestImageRunsLikeTheDaemonSet(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: podman runs the image privileged, as the DaemonSet does")
	}
	archive := os.Getenv("NSBOX_TEST_IMAGE")
	if archive == "" {
		t.Skip("set NSBOX_TEST_IMAGE to an archive from `make image` (make test-image does)")
	}
	if !filepath.IsAbs(archive) {
		t.Fatalf("NSBOX_TEST_IMAGE=%s: want an absolute path (the test runs in its package's directory)", archive)
	}
	store, _ := testdaemon.Rootfs(t)
	ds, conf := daemonSet(t)
	spec := ds.Spec.Template.Spec
	dsDefault := strings.TrimSpace(strings.Split(strings.Split(conf, "default_rootfs = \"")[1], "\"")[0])
	if _, err := os.Stat(filepath.Join(store, dsDefault, "rootfs")); err != nil {
		t.Skipf("requires the DaemonSet's default rootfs %q in %s (make rootfs-default): %v", dsDefault, store, err)
	}

	// Not t.TempDir(): podman refuses a runroot path over 50 characters.
	dir, err := os.MkdirTemp("", "nsbox-img-")
	if err != nil {
		t.Fatal(err)
	}
	sock, etc := filepath.Join(dir, "run-nsbox"), filepath.Join(dir, "etc-nsbox")
	for _, d := range []string{sock, etc, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(etc, "nsbox.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pm := newPodman(t, dir)
	name := testdaemon.RandomName("nsbox-it-")
	// The containers' and conmon's cgroups go under a parent of the test's
	// own, removed at the end (podman would leave libpod_parent behind).
	cgParent := "/" + name
	t.Cleanup(func() {
		pm.run(true, "rm", "-f", "-t", "0", name)
		pm.run(true, "rmi", "-a", "-f")
		unmountUnder(t, dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing podman's private store: %v", err)
		}
		removeCgroupTree(t, cgParent)
	})

	// The image: loaded, named as the manifest's image, labelled.
	out, _ := pm.run(false, "load", "-i", archive)
	ref := ""
	for _, line := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(line, "Loaded image: "); ok {
			ref = strings.TrimSpace(r)
		}
	}
	if ref == "" {
		t.Fatalf("podman load printed no image name:\n%s", out)
	}
	image := spec.Containers[0].Image
	repo := image[:strings.LastIndex(image, ":")]
	if !strings.HasPrefix(ref, "docker.io/library/"+repo+":") {
		t.Errorf("loaded %s: the manifest's image %s (docker.io/library/%s:…) would not find it", ref, image, repo)
	}
	labels, _ := pm.run(false, "image", "inspect", "--format", "{{json .Labels}} {{.Size}}", ref)
	if !strings.Contains(labels, `"org.opencontainers.image.version"`) || !strings.Contains(labels, `"org.opencontainers.image.source"`) {
		t.Errorf("image labels: %s", labels)
	}
	t.Logf("image %s: labels and size %s", ref, strings.TrimSpace(labels))

	// What the DaemonSet gives the containers: privileged, the node's
	// socket dir and store, the ConfigMap.
	runArgs := func(c corev1.Container) []string {
		a := []string{"--cgroup-parent", cgParent, "--privileged", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
			"-v", store + ":/var/lib/nsbox/rootfs", "-v", sock + ":/run/nsbox", "-v", etc + ":/etc/nsbox:ro",
			"--entrypoint", c.Command[0], ref}
		return append(a, c.Command[1:]...)
	}

	// The init container passes on this host; asked for a rootfs the store
	// lacks, it fails and names the fix.
	ic := spec.InitContainers[0]
	if out, err := pm.run(true, append([]string{"run", "--rm"}, runArgs(ic)...)...); err != nil {
		t.Fatalf("init container %q: %v\n%s", ic.Command, err, out)
	}
	bad := ic
	bad.Command = []string{"/usr/local/bin/nsbox", "doctor", "--rootfs", "no-such-rootfs"}
	if out, err := pm.run(true, append([]string{"run", "--rm"}, runArgs(bad)...)...); err == nil || !strings.Contains(out, "nsbox rootfs build") {
		t.Errorf("init container with a missing rootfs: %v\n%s\nwant a failure naming nsbox rootfs build", err, out)
	}

	// The daemon, and its probe until it answers.
	c := spec.Containers[0]
	id := strings.TrimSpace(must(pm.run(false, append([]string{"run", "-d", "--name", name}, runArgs(c)...)...)))
	probe := c.ReadinessProbe.Exec.Command
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := pm.run(true, append([]string{"exec", name}, probe...)...)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := pm.run(true, "logs", name)
			t.Fatalf("the probe %q never passed: %v %s\nlogs:\n%s", probe, err, out, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}

	cl := &client.Client{Socket: filepath.Join(sock, "nsbox.sock")}
	ctx := context.Background()
	run := func(req *agentapi.RunRequest) *agentapi.RunResult {
		t.Helper()
		req.Language = agentapi.LanguagePython
		res, err := cl.Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(&agentapi.RunRequest{Code: "print(1)"}); res.Status != agentapi.StatusOK || res.Stdout != "1\n" {
		t.Errorf("print(1): %+v", res)
	}
	// Once its zygote is up, runs on the DaemonSet's default rootfs are
	// its children, the data-science stack imported.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		info, err := cl.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Zygotes) > 0 && info.Zygotes[0].State == "ready" && (len(info.Pools) == 0 || info.Pools[0].Forked == info.Pools[0].Size) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready zygote in the container after 3 minutes: %+v %+v", info.Zygotes, info.Pools)
		}
	}
	if res := run(&agentapi.RunRequest{Code: "import sys\nprint('pandas' in sys.modules)"}); res.Stdout != "True\n" {
		t.Errorf("a run on the DaemonSet's default rootfs should come from its zygote, pandas imported: %+v", res)
	}

	// A session keeps its state between cells.
	sess, err := cl.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x = 20"}); err != nil {
		t.Fatal(err)
	}
	if r, err := cl.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: "x * 2 + 2"}); err != nil || r.Value != "42" {
		t.Errorf("session: %+v %v", r, err)
	}
	if err := cl.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}

	// Limits: memory and time.
	if res := run(&agentapi.RunRequest{Code: "x = bytearray(1 << 30)", Limits: &agentapi.Limits{MemoryBytes: 64 << 20}}); res.Status != agentapi.StatusOOM {
		t.Errorf("1 GiB under a 64 MiB limit: %s (%s)", res.Status, res.Error)
	}
	if res := run(&agentapi.RunRequest{Code: "while True: pass", Limits: &agentapi.Limits{TimeoutMs: 1000}}); res.Status != agentapi.StatusTimeout {
		t.Errorf("an endless loop under a 1 s limit: %s", res.Status)
	}

	// The sandbox inside a privileged container is as shut in as on the
	// host: no capabilities, only lo, a read-only rootfs, an unprivileged
	// uid; and its cgroup nests under the container's, so the pod's
	// limits bind it.
	esc := run(&agentapi.RunRequest{Code: `
import os, socket
caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd', 'CapAmb'))]
print('caps', set(caps))
print('ifaces', [n for _, n in socket.if_nameindex()])
try:
    open('/usr/lib/x', 'w')
    print('rootfs writable')
except OSError as e:
    print('rootfs', e.errno)
print('uid', os.getuid())
`})
	for _, want := range []string{"caps {'0000000000000000'}", "ifaces ['lo']", "rootfs 30", "uid 1000"} {
		if !strings.Contains(esc.Stdout, want+"\n") {
			t.Errorf("escape checks: want %q in\n%s%s", want, esc.Stdout, esc.Stderr)
		}
	}

	// The drain: SIGTERM (podman stop, as the kubelet does) with a run in
	// flight; the run finishes, the daemon exits 0 and leaves nothing.
	type answer struct {
		res *agentapi.RunResult
		err error
	}
	done := make(chan answer, 1)
	ready := make(chan struct{})
	go func() {
		var once bool
		res, err := cl.RunStream(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython,
			Code: "import time\nprint('ready', flush=True)\ntime.sleep(2)\nprint('drained')"}, func(ev agentapi.Event) {
			if ev.Type == agentapi.EventStdout && !once {
				once = true
				close(ready)
			}
		})
		done <- answer{res, err}
	}()
	select {
	case <-ready:
	case a := <-done:
		t.Fatalf("the run ended before it was ready: %+v %v", a.res, a.err)
	}
	cgroupDirs := containerCgroups(t, id)
	stopped := make(chan error, 1)
	go func() {
		_, err := pm.run(true, "stop", "-t", fmt.Sprint(*spec.TerminationGracePeriodSeconds), name)
		stopped <- err
	}()
	a := <-done
	if a.err != nil || a.res.Status != agentapi.StatusOK || !strings.Contains(a.res.Stdout, "drained") {
		t.Errorf("the run in flight at SIGTERM: %+v %v, want it to finish", a.res, a.err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("podman stop: %v", err)
	}
	if code := strings.TrimSpace(must(pm.run(false, "inspect", "--format", "{{.State.ExitCode}}", name))); code != "0" {
		logs, _ := pm.run(true, "logs", name)
		t.Errorf("the daemon exited %s after SIGTERM, want 0\n%s", code, logs)
	}
	logs, _ := pm.run(true, "logs", name)
	if !strings.Contains(logs, "shut down") {
		t.Errorf("no 'shut down' in the daemon's log:\n%s", logs)
	}
	for _, d := range cgroupDirs {
		ents, err := os.ReadDir(filepath.Join(d, "nsbox"))
		if err == nil && len(ents) > 0 {
			var names []string
			for _, e := range ents {
				if e.IsDir() {
					names = append(names, e.Name())
				}
			}
			if len(names) > 0 {
				t.Errorf("sandbox cgroups left in %s after the daemon stopped: %v", d, names)
			}
		}
	}
	if m := testdaemon.Mounts(t, sock); len(m) > 0 {
		t.Errorf("mounts left under the socket dir: %v", m)
	}
}

// containerCgroups lists the container's cgroup directories (one per v1
// hierarchy, or the v2 one) while it runs, and checks the daemon's
// sandboxes nest there.
func containerCgroups(t *testing.T, id string) []string {
	t.Helper()
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Contains(filepath.Base(path), id) {
			dirs = append(dirs, path)
			return filepath.SkipDir
		}
		if strings.Count(path, "/") > 7 {
			return filepath.SkipDir
		}
		return nil
	})
	if len(dirs) == 0 {
		t.Fatalf("no cgroup of container %s under /sys/fs/cgroup", id)
	}
	nested := false
	for _, d := range dirs {
		if ents, err := os.ReadDir(filepath.Join(d, "nsbox")); err == nil && len(ents) > 0 {
			nested = true
		}
	}
	if !nested {
		t.Errorf("no sandbox cgroup under the container's cgroups %v: the pod's limits would not bind the sandboxes", dirs)
	}
	return dirs
}

func must(s string, _ error) string { return s }

// removeCgroupTree removes the cgroup parent (and its empty children) the
// test gave podman, in every hierarchy; a cgroup with a process left in it
// is an error.
func removeCgroupTree(t *testing.T, parent string) {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		root := filepath.Join(h, parent)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				t.Errorf("cgroup %s left: %v", dirs[i], err)
			}
		}
	}
}

// The archive is what the other tools of the field read: skopeo copies it
// (to a registry, in real use; to a directory here), and containerd's
// import, which `kind load image-archive` and `ctr images import` run on
// a node, names it as the DaemonSet's image reference resolves.
func TestImageArchiveImports(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("requires root: containerd runs as root")
	}
	archive := os.Getenv("NSBOX_TEST_IMAGE")
	if archive == "" {
		t.Skip("set NSBOX_TEST_IMAGE to an archive from `make image` (make test-image does)")
	}
	for _, tool := range []string{"skopeo", "containerd", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: make test-image installs it", tool)
		}
	}
	dir, err := os.MkdirTemp("", "nsbox-ctd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)

	out, err := exec.Command("skopeo", "copy", "oci-archive:"+archive, "dir:"+filepath.Join(dir, "copy")).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo copy: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "copy", "manifest.json")); err != nil {
		t.Errorf("skopeo copy wrote no manifest: %v", err)
	}

	// A private containerd: its own root, state and socket, killed after.
	sock := filepath.Join(dir, "c.sock")
	ctd := exec.Command("containerd", "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"), "--address", sock)
	var logs testdaemon.LockedBuffer
	ctd.Stdout, ctd.Stderr = &logs, &logs
	if err := ctd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = ctd.Process.Kill()
		_ = ctd.Wait()
		unmountUnder(t, dir)
	}()
	var imported string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		b, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "import", "--all-platforms", "--digests", archive).CombinedOutput()
		if err == nil {
			imported = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctr images import: %v\n%s\ncontainerd:\n%s", err, b, logs.String())
		}
	}
	ds, _ := daemonSet(t)
	image := ds.Spec.Template.Spec.Containers[0].Image
	repo := image[:strings.LastIndex(image, ":")]
	list, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(list), "docker.io/library/"+repo+":") {
		t.Errorf("containerd named the import %q (%s): the manifest's %s resolves to docker.io/library/%s:…", list, imported, image, repo)
	}
}
