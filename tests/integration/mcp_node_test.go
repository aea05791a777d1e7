package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// dataSciAvailable returns the data-science rootfs name and whether it is
// in the test store (without skipping).
func dataSciAvailable(t *testing.T) (string, bool) {
	t.Helper()
	store, _ := testRootfs(t)
	name := os.Getenv("NSBOX_TEST_DATASCI_ROOTFS_NAME")
	if name == "" {
		name = "default"
	}
	_, err := os.Stat(filepath.Join(store, name, "rootfs/usr/lib/python3/dist-packages/matplotlib"))
	return name, err == nil
}

// nodeClientDir returns tests/mcp-client with its node_modules installed
// (npm ci), skipping when node or npm is missing.
func nodeClientDir(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("requires %s for the MCP TypeScript SDK client (apt-get install nodejs npm): %v", tool, err)
		}
	}
	dir, err := filepath.Abs(filepath.Join("..", "mcp-client"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err == nil {
		return dir
	}
	args := []string{"ci", "--no-audit", "--no-fund"}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		args = []string{"install", "--no-audit", "--no-fund"}
	}
	cmd := exec.Command("npm", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm %v in %s (needs the npm registry, or run `make deps`): %v\n%s", args, dir, err, out)
	}
	return dir
}

// waitNoSessions polls until the daemon has no live session.
func waitNoSessions(t *testing.T, d *daemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := d.client.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions still live after the MCP connection ended: %+v", ss)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPTypeScriptClient drives `nsbox mcp` with the official MCP
// TypeScript SDK (tests/mcp-client/mcp_client_test.mjs): tools/list, state
// across calls, exceptions and timeouts as isError results, the shell,
// the file tools, a matplotlib plot decoded as PNG, reset_session.
func TestMCPTypeScriptClient(t *testing.T) {
	d := startDaemon(t)
	dir := nodeClientDir(t)
	rootfs, plot := dataSciAvailable(t)
	env := append(os.Environ(), "NSBOX_BIN="+nsboxBin, "NSBOX_SOCKET="+d.sock)
	if plot {
		env = append(env, "NSBOX_MCP_ROOTFS="+rootfs)
	} else {
		t.Logf("no data-science rootfs %q: the plot part is skipped (build it: nsbox rootfs build --profile datasci --name %s)", rootfs, rootfs)
		env = append(env, "NSBOX_MCP_PLOT=0")
	}
	cmd := exec.Command("node", "mcp_client_test.mjs")
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node mcp_client_test.mjs: %v\n%s", err, out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("mcp-client: PASS")) {
		t.Fatalf("node client did not pass:\n%s", out.String())
	}
	t.Logf("node client:\n%s", out.String())
	waitNoSessions(t, d)
}
