// Package k8s holds the Kubernetes manifests; its test validates them.
//
// Every document is decoded strictly into the Kubernetes API types
// (k8s.io/api, with sigs.k8s.io/yaml as kubectl does): an unknown or
// misspelt field, a wrong type, a bad quantity or a duplicate key fails,
// as the API server's strict field validation would. Schema validators
// that fetch their schemas (kubeconform) cannot run here, with no network
// but the Go proxy. Then what the manifests promise is checked: the
// probes call `nsbox health`, the grace period outlasts the daemon's
// drain, the ConfigMap's nsbox.conf loads with the daemon's own loader,
// the image is the one `make image` names, the agent pod gets into the
// socket's group without privilege.
package k8s

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nsbox/nsbox/daemon/config"
)

// SocketGID is the image's nsbox group (scripts/image.SocketGID).
const socketGID = 10001

type manifests struct {
	namespaces map[string]*corev1.Namespace
	configMaps map[string]*corev1.ConfigMap
	daemonSets map[string]*appsv1.DaemonSet
	pods       map[string]*corev1.Pod
}

// load decodes every document of file strictly.
func load(t *testing.T, m *manifests, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", file, i+1, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "v1 Pod":
			obj = &corev1.Pod{}
		default:
			t.Fatalf("%s document %d: apiVersion %q kind %q: not a kind this test knows; add it", file, i+1, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s document %d (%s): %v", file, i+1, meta.Kind, err)
			continue
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			m.namespaces[o.Name] = o
		case *corev1.ConfigMap:
			m.configMaps[o.Namespace+"/"+o.Name] = o
		case *appsv1.DaemonSet:
			m.daemonSets[o.Namespace+"/"+o.Name] = o
		case *corev1.Pod:
			m.pods[o.Namespace+"/"+o.Name] = o
		}
	}
}

func loadAll(t *testing.T) *manifests {
	m := &manifests{map[string]*corev1.Namespace{}, map[string]*corev1.ConfigMap{}, map[string]*appsv1.DaemonSet{}, map[string]*corev1.Pod{}}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("manifests: %v %v", files, err)
	}
	for _, f := range files {
		load(t, m, f)
	}
	return m
}

// The decoder this test relies on refuses what kubectl would: a test that
// cannot fail is no check.
func TestStrictDecodingRefusesTypos(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: b, imagePullPolicy: IfNotPresent, comand: [x]}]\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      terminationGracePeriodSeconds: forty\n",
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: [{name: a, resources: {limits: {memory: 8Gigs}}}]\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x, name: y}\n",
	} {
		var ds appsv1.DaemonSet
		if err := yaml.UnmarshalStrict([]byte(doc), &ds); err == nil {
			t.Errorf("accepted:\n%s", doc)
		}
	}
}

func TestDaemonSet(t *testing.T) {
	m := loadAll(t)
	ns := m.namespaces["nsbox"]
	if ns == nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Fatalf("namespace nsbox must exist and enforce the privileged Pod Security level (the daemon is privileged): %+v", ns)
	}
	ds := m.daemonSets["nsbox/nsbox"]
	if ds == nil {
		t.Fatal("no DaemonSet nsbox/nsbox")
	}
	spec := ds.Spec.Template.Spec
	if sel := ds.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 {
		t.Fatal("DaemonSet without a selector")
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template's labels %v", k, v, ds.Spec.Template.Labels)
		}
	}

	// The config: it loads with the daemon's own loader, and the grace
	// period outlasts its drain.
	cm := m.configMaps["nsbox/nsbox-config"]
	if cm == nil || cm.Data["nsbox.conf"] == "" {
		t.Fatal("no ConfigMap nsbox/nsbox-config with nsbox.conf")
	}
	confFile := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(confFile, []byte(cm.Data["nsbox.conf"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(confFile, nil)
	if err != nil {
		t.Fatalf("the ConfigMap's nsbox.conf: %v", err)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.ShutdownGrace+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v must exceed shutdown_grace %s by some seconds, or runs in flight are killed", g, cfg.ShutdownGrace)
	}

	if len(spec.Containers) != 1 || len(spec.InitContainers) != 1 {
		t.Fatalf("want one daemon container and one init container, got %d and %d", len(spec.Containers), len(spec.InitContainers))
	}
	c, ic := spec.Containers[0], spec.InitContainers[0]
	for _, x := range []corev1.Container{c, ic} {
		if !strings.HasPrefix(x.Image, "nsbox:v") || x.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("%s: image %q (%s), want nsbox:vX.Y.Z, what make image VERSION=vX.Y.Z loads, and IfNotPresent", x.Name, x.Image, x.ImagePullPolicy)
		}
		if x.SecurityContext == nil || x.SecurityContext.Privileged == nil || !*x.SecurityContext.Privileged {
			t.Errorf("%s: must be privileged (see the comment in the manifest)", x.Name)
		}
	}
	if c.Image != ic.Image {
		t.Errorf("init container image %s, daemon %s: want the same", ic.Image, c.Image)
	}
	if want := []string{"/usr/local/bin/nsbox", "daemon", "--config", "/etc/nsbox/nsbox.conf"}; !slices.Equal(c.Command, want) {
		t.Errorf("daemon command %q, want %q", c.Command, want)
	}
	if want := []string{"/usr/local/bin/nsbox", "doctor", "--rootfs", cfg.DefaultRootfs}; !slices.Equal(ic.Command, want) {
		t.Errorf("init command %q, want %q (the config's default_rootfs)", ic.Command, want)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.Exec == nil || len(p.Exec.Command) < 2 || p.Exec.Command[0] != "/usr/local/bin/nsbox" || p.Exec.Command[1] != "health" {
			t.Errorf("%s probe %+v: want exec nsbox health", name, p)
			continue
		}
		if i := slices.Index(p.Exec.Command, "--timeout"); i < 0 || i+1 >= len(p.Exec.Command) {
			t.Errorf("%s probe: no --timeout", name)
		} else if d, err := time.ParseDuration(p.Exec.Command[i+1]); err != nil || d >= time.Duration(p.TimeoutSeconds)*time.Second {
			t.Errorf("%s probe: nsbox health --timeout %s must be below timeoutSeconds %d", name, p.Exec.Command[i+1], p.TimeoutSeconds)
		}
	}
	if mem := c.Resources.Limits.Memory(); mem.IsZero() {
		t.Error("the daemon container needs a memory limit: it bounds all the node's sandboxes")
	}

	// Mounts: the socket dir and the store are the node's.
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	for path, host := range map[string]string{"/run/nsbox": "/run/nsbox", "/var/lib/nsbox": "/var/lib/nsbox"} {
		v, ok := vols[mounts[path]]
		if !ok || v.HostPath == nil || v.HostPath.Path != host {
			t.Errorf("%s must be the node's %s (hostPath): %+v", path, host, v)
		}
	}
	if v, ok := vols[mounts["/etc/nsbox"]]; !ok || v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
		t.Errorf("/etc/nsbox must be the ConfigMap %s", cm.Name)
	}
}

func TestAgentPod(t *testing.T) {
	m := loadAll(t)
	p := m.pods["agents/agent"]
	if p == nil {
		t.Fatal("no Pod agents/agent")
	}
	if ns := m.namespaces[p.Namespace]; ns == nil || ns.Labels["pod-security.kubernetes.io/enforce"] == "" {
		t.Errorf("the agents' namespace must exist with a Pod Security level: %+v", ns)
	}
	ds := m.daemonSets["nsbox/nsbox"]
	for k, v := range ds.Spec.Template.Spec.NodeSelector {
		if p.Spec.NodeSelector[k] != v {
			t.Errorf("the agent's nodeSelector %v does not pick the DaemonSet's nodes (%s=%s)", p.Spec.NodeSelector, k, v)
		}
	}
	sc := p.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || !slices.Contains(sc.SupplementalGroups, socketGID) {
		t.Errorf("the agent pod must run as non-root in the socket's group %d: %+v", socketGID, sc)
	}
	c := p.Spec.Containers[0]
	if c.SecurityContext == nil || (c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged) ||
		c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
		c.SecurityContext.Capabilities == nil || !slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		t.Errorf("the agent container needs no privilege: %+v", c.SecurityContext)
	}
	var socketDir string
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == "/run/nsbox" {
			socketDir = v.Name
		}
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || (vm.Name == socketDir && vm.MountPath == "/run/nsbox")
	}
	if socketDir == "" || !mounted {
		t.Error("the agent pod must mount the node's /run/nsbox at /run/nsbox")
	}
	if !strings.Contains(fmt.Sprint(c.Env), "/run/nsbox/nsbox.sock") {
		t.Errorf("the agent pod should name the socket in NSBOX_SOCKET: %v", c.Env)
	}
}
