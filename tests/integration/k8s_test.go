package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonSetManifest: scripts/k8s/nsbox-daemonset.yaml parses as YAML
// and holds the Namespace, ConfigMap and a privileged DaemonSet that mounts
// the socket directory from the host.
func TestDaemonSetManifest(t *testing.T) {
	if err := exec.Command("python3", "-c", "import yaml").Run(); err != nil {
		t.Skip("requires python3 with PyYAML (Debian package python3-yaml): ", err)
	}
	check := `
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = [d["kind"] for d in docs]
assert kinds == ["Namespace", "ConfigMap", "DaemonSet"], kinds
ds = docs[2]["spec"]["template"]["spec"]
c = ds["containers"][0]
assert c["securityContext"]["privileged"] is True
mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
vols = {v["name"]: v for v in ds["volumes"]}
assert mounts["run"] == "/run/nsbox" and vols["run"]["hostPath"]["path"] == "/run/nsbox", (mounts, vols)
open(sys.argv[2], "w").write(docs[1]["data"]["nsbox.conf"])
print("ok")
`
	conf := filepath.Join(t.TempDir(), "nsbox.conf")
	out, err := exec.Command("python3", "-c", check, filepath.Join(repoRoot, "scripts", "k8s", "nsbox-daemonset.yaml"), conf).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("manifest check: %v\n%s", err, out)
	}
	if nsboxBin == "" {
		t.Log("not checking the ConfigMap's nsbox.conf: the binary is built only as root")
		return
	}
	if out, err := execNsbox("daemon", "--config", conf, "--check-config").CombinedOutput(); err != nil {
		t.Errorf("the ConfigMap's nsbox.conf: %v\n%s", err, out)
	}
}
