package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleDataAnalysis runs scripts/examples/data_analysis.py (the
// worked example: a CSV handed to a session, pandas, a regression, two
// checked plots) against a daemon with the data-science rootfs.
func TestExampleDataAnalysis(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("requires python3 on the host to run the example: %v", err)
	}
	d := startDaemon(t)
	rootfs, ok := dataSciAvailable(t)
	if !ok {
		t.Skipf("requires the data-science rootfs %q with pandas and matplotlib (make rootfs-default)", rootfs)
	}
	out := t.TempDir()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "examples", "data_analysis.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script, "--socket", d.sock, "--rootfs", rootfs, "--out", out)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("data_analysis.py: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "all checks passed") {
		t.Fatalf("data_analysis.py did not finish its checks:\n%s", log)
	}
	for _, name := range []string{"fit.png", "residuals.png"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") {
			t.Errorf("%s: %v (%d bytes)", name, err, len(b))
		}
	}
	waitNoSessions(t, d)
}
