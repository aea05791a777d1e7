package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonClient runs agentapi/python/test_nsbox_client.py (unittest)
// with the machine's python3 against a real daemon.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("requires python3 on the host for the Python client's tests: %v", err)
	}
	d := startDaemon(t)
	dir, err := filepath.Abs(filepath.Join("..", "..", "agentapi", "python"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NSBOX_SOCKET="+d.sock, "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+dir)
	if name, ok := dataSciAvailable(t); ok {
		cmd.Env = append(cmd.Env, "NSBOX_DATASCI_ROOTFS="+name)
	} else {
		t.Logf("no data-science rootfs %q: the figure test is skipped", name)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest test_nsbox_client: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "skipped 'set NSBOX_SOCKET") {
		t.Fatalf("the client tests did not see the daemon:\n%s", out)
	}
	if _, ok := dataSciAvailable(t); ok && strings.Contains(string(out), "skipped 'set NSBOX_DATASCI_ROOTFS") {
		t.Fatalf("the figure test was skipped although the data-science rootfs is there:\n%s", out)
	}
	t.Logf("%s", out)
}
