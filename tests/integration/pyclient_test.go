package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonPackage installs agentapi/python into a fresh venv, as a user
// would (pip install), and runs the package's own tests (unittest) with
// that venv's interpreter against real daemons: one as the tests start
// it (its socket open to uid 65534, NSBOX_OTHER_UID, whom the owner
// tests try as another user), one with a single session slot for the
// retry tests. The tests run from a copy outside the source tree, so
// what they import is the installed package.
func TestPythonPackage(t *testing.T) {
	// Debian's interpreter, with Debian's python3-venv; CI installs both
	// (make deps): there a missing one fails the test.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("requires Debian's python3 (/usr/bin/python3) for the Python package's tests: %v", err)
		}
		t.Fatalf("Debian's python3 (/usr/bin/python3), which make deps installs: %v", err)
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "agentapi", "python"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	venv := filepath.Join(tmp, "venv")
	if out, err := exec.Command(py, "-m", "venv", venv).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("python3 -m venv failed (install python3-venv, as make deps does): %v\n%s", err, out)
		}
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	// Offline, as the README says: the package's build backend is in-tree
	// and needs nothing from an index (TestPythonPackageInstallsOffline
	// tries every python3 here).
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", src)
	pip.Env = append(os.Environ(), "PIP_FIND_LINKS=")
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install --no-index ./agentapi/python: %v\n%s", err, out)
	}
	tests := filepath.Join(tmp, "t")
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"tests", "examples"} {
		if _, err := os.Stat(filepath.Join(src, dir)); os.IsNotExist(err) {
			continue
		}
		if out, err := exec.Command("cp", "-r", filepath.Join(src, dir), tests).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
	}

	// The examples use the daemon's default rootfs, as a user's would:
	// the data-science one when there is one.
	name, datasci := dataSciAvailable(t)
	var d *daemon
	if datasci {
		d = startDaemon(t, "--default-rootfs", name)
	} else {
		d = startDaemon(t)
		t.Logf("no data-science rootfs %q: the tests that need pandas and the examples are skipped", name)
	}
	openToAll(t, d)
	one := startDaemon(t, "--max-sessions", "1", "--max-concurrent", "1", "--pool-size", "0", "--zygote=false")
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Dir = tests
	cmd.Env = append(os.Environ(), "NSBOX_SOCKET="+d.sock, "NSBOX_SOCKET_ONE_SESSION="+one.sock,
		"NSBOX_EXPECT_INSTALLED=1", "PYTHONDONTWRITEBYTECODE=1", fmt.Sprintf("NSBOX_OTHER_UID=%d", nobody))
	if datasci {
		cmd.Env = append(cmd.Env, "NSBOX_DATASCI_ROOTFS="+name)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest (the installed nsbox package): %v\n%s", err, out)
	}
	if strings.Contains(string(out), "skipped 'set NSBOX_SOCKET to") || strings.Contains(string(out), "skipped 'set NSBOX_SOCKET_ONE_SESSION") ||
		strings.Contains(string(out), "skipped 'set NSBOX_OTHER_UID") {
		t.Fatalf("the package's tests did not see the daemons:\n%s", out)
	}
	if datasci && (strings.Contains(string(out), "skipped 'set NSBOX_DATASCI_ROOTFS") ||
		strings.Contains(string(out), "skipped 'the examples use")) {
		t.Fatalf("tests were skipped although the data-science rootfs is there:\n%s", out)
	}
	t.Logf("%s", out)
}
