package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpConnect spawns `nsbox mcp` with args and connects the Go SDK's client.
func mcpConnect(t *testing.T, d *daemon, args ...string) *mcpsdk.ClientSession {
	t.Helper()
	cmd := exec.Command(nsboxBin, append([]string{"mcp", "--socket", d.sock}, args...)...)
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "nsbox-it"}, nil).Connect(context.Background(), &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) (*mcpsdk.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res, b.String()
}

// TestMCPSessionPerConnection checks that two MCP connections get two
// sessions, isolated, and that each is deleted when its connection ends.
func TestMCPSessionPerConnection(t *testing.T) {
	d := startDaemon(t)
	a, b := mcpConnect(t, d), mcpConnect(t, d)
	if res, text := callText(t, a, "run_python", map[string]any{"code": "secret = 'a'"}); res.IsError {
		t.Fatal(text)
	}
	if res, text := callText(t, b, "run_python", map[string]any{"code": "secret"}); !res.IsError || !strings.Contains(text, "NameError") {
		t.Fatalf("connection b sees a's state: %s", text)
	}
	ss, err := d.client.Sessions(context.Background())
	if err != nil || len(ss) != 2 {
		t.Fatalf("sessions %+v %v, want 2", ss, err)
	}
	// A session named explicitly is used as is.
	res, text := callText(t, b, "run_python", map[string]any{"code": "secret", "session_id": ss[0].ID})
	res2, text2 := callText(t, b, "run_python", map[string]any{"code": "secret", "session_id": ss[1].ID})
	if res.IsError == res2.IsError {
		t.Fatalf("explicit session ids: %s / %s", text, text2)
	}
	a.Close()
	b.Close()
	waitNoSessions(t, d)
}

// TestMCPSessionDies checks that a session killed by OOM is an isError
// result and the next call runs in a fresh session.
func TestMCPSessionDies(t *testing.T) {
	d := startDaemon(t)
	cs := mcpConnect(t, d, "--memory", "64M")
	callText(t, cs, "run_python", map[string]any{"code": "x = 1"})
	res, text := callText(t, cs, "run_python", map[string]any{"code": "b = bytearray(512 << 20)"})
	if !res.IsError || !strings.Contains(text, "died") {
		t.Fatalf("OOM cell: isError %v %s", res.IsError, text)
	}
	res, text = callText(t, cs, "run_python", map[string]any{"code": "'x' in globals()"})
	if res.IsError || !strings.Contains(text, "False") {
		t.Fatalf("after death: %s", text)
	}
}

// TestMCPPerCall checks --session-mode per-call: two tools, no state kept.
func TestMCPPerCall(t *testing.T) {
	d := startDaemon(t)
	cs := mcpConnect(t, d, "--session-mode", "per-call")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools %+v %v", tools, err)
	}
	callText(t, cs, "run_python", map[string]any{"code": "x = 1"})
	if res, text := callText(t, cs, "run_python", map[string]any{"code": "print(6*7)\nx"}); !res.IsError || !strings.Contains(text, "42") || !strings.Contains(text, "NameError") {
		t.Fatalf("per-call state: %s", text)
	}
	if res, text := callText(t, cs, "run_shell", map[string]any{"command": "echo $((6*7)); exit 4"}); !res.IsError || !strings.Contains(text, "42") || !strings.Contains(text, "exit code 4") {
		t.Fatalf("per-call shell: %s", text)
	}
	if ss, _ := d.client.Sessions(context.Background()); len(ss) != 0 {
		t.Fatalf("per-call mode made sessions: %+v", ss)
	}
}

// TestMCPDescribesDaemon checks that `nsbox mcp` describes the sandbox
// the daemon gives (its rootfs, the call's limits), that a bound is
// explained in its unit, and that a shell flood names the output cap.
func TestMCPDescribesDaemon(t *testing.T) {
	d := startDaemon(t)
	_, rootfs := testRootfs(t)
	info, err := d.client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	maxS := info.MaxLimits.TimeoutMs / 1000
	cs := mcpConnect(t, d, "--memory", "256M", "--timeout", "20s", "--output", "64K")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "run_python" {
			continue
		}
		for _, want := range []string{rootfs + ")", "stopped after 20 s", fmt.Sprintf("at most %d s", maxS), "256 MiB of memory", "64 KiB of stdout"} {
			if !strings.Contains(tool.Description, want) {
				t.Errorf("run_python's description lacks %q: %s", want, tool.Description)
			}
		}
	}
	res, text := callText(t, cs, "run_python", map[string]any{"code": "1", "timeout_s": maxS * 10})
	if want := fmt.Sprintf("timeout_s is %d, above its maximum of %d s", maxS*10, maxS); !res.IsError || !strings.Contains(text, want) {
		t.Errorf("timeout past the maximum: %s", text)
	}
	res, text = callText(t, cs, "run_shell", map[string]any{"command": "yes"})
	if !res.IsError || !strings.Contains(text, "status: output_limit") || !strings.Contains(text, "cap of 64 KiB per stream") || strings.Contains(text, "KeyboardInterrupt") {
		t.Errorf("shell flood: %s", text)
	}
}

// TestToolsCLI checks `nsbox tools` prints each format as a JSON array of
// tools with valid names.
func TestToolsCLI(t *testing.T) {
	if buildErr != nil || nsboxBin == "" {
		t.Skip("requires root: the nsbox binary is built by TestMain as root")
	}
	name := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, format := range []string{"openai", "anthropic", "mcp"} {
		t.Run(format, func(t *testing.T) {
			out, err := execNsbox("tools", "--format", format).Output()
			if err != nil {
				t.Fatal(err)
			}
			var list []map[string]any
			if err := json.Unmarshal(out, &list); err != nil || len(list) != 8 { // seven, and run_javascript
				t.Fatalf("%d tools, %v:\n%s", len(list), err, out)
			}
			for _, m := range list {
				n, _ := m["name"].(string)
				if f, ok := m["function"].(map[string]any); ok {
					n, _ = f["name"].(string)
				}
				if !name.MatchString(n) {
					t.Errorf("tool name %q", n)
				}
			}
		})
	}
	if err := execNsbox("tools", "--format", "xml").Run(); err == nil {
		t.Fatal("--format xml: no error")
	}
}
