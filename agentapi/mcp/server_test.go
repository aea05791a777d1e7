package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// connect serves a Server in mode over an in-memory transport and returns
// a client session of the SDK's own client. The daemon socket does not
// exist.
func connect(t *testing.T, mode string) *mcpsdk.ClientSession {
	t.Helper()
	return connectConfig(t, Config{SessionMode: mode})
}

// connectConfig is connect for a Server of cfg; a nil cfg.Client is one
// whose socket does not exist, nil cfg.Languages this build's, as nsbox
// mcp passes them.
func connectConfig(t *testing.T, cfg Config) *mcpsdk.ClientSession {
	t.Helper()
	if cfg.Languages == nil {
		cfg.Languages = builtinLangs()
	}
	if cfg.Client == nil {
		cfg.Client = &client.Client{Socket: filepath.Join(t.TempDir(), "none.sock")}
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcpsdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return cs
}

func TestNewSessionMode(t *testing.T) {
	if _, err := New(Config{SessionMode: "per-day"}); !errors.Is(err, ErrUnknownSessionMode) {
		t.Fatalf("err %v, want ErrUnknownSessionMode", err)
	}
}

func TestListTools(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"per-connection", Config{}, []string{ToolRunPython, ToolRunShell, ToolWriteFile, ToolReadFile, ToolListFiles, ToolForkSession, ToolResetSession}},
		{"per-call", Config{SessionMode: SessionPerCall}, []string{ToolRunPython, ToolRunShell}},
		{"per-connection, rootfs with node", Config{Info: dataSciInfo()},
			[]string{ToolRunPython, ToolRunJavaScript, ToolRunShell, ToolWriteFile, ToolReadFile, ToolListFiles, ToolForkSession, ToolResetSession}},
		{"per-call, rootfs with node", Config{Info: dataSciInfo(), SessionMode: SessionPerCall}, []string{ToolRunPython, ToolRunJavaScript, ToolRunShell}},
		{"rootfs without node", Config{Info: dataSciInfo(), Rootfs: "minimal"}, []string{ToolRunPython, ToolRunShell, ToolWriteFile, ToolReadFile, ToolListFiles, ToolForkSession, ToolResetSession}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := connectConfig(t, tc.cfg)
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				if s, ok := tool.InputSchema.(map[string]any); !ok || s["type"] != "object" {
					t.Errorf("%s: input schema %v", tool.Name, tool.InputSchema)
				}
			}
			slices.Sort(names) // the SDK lists tools by name
			slices.Sort(tc.want)
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("tools %v, want %v", names, tc.want)
			}
		})
	}
}

// TestToolErrors checks that failures reach the model as isError results
// and only protocol misuse is a JSON-RPC error.
func TestToolErrors(t *testing.T) {
	cs := connect(t, SessionPerConnection)
	tests := []struct {
		name string
		args map[string]any
		want string // in the error text
	}{
		{ToolRunPython, map[string]any{"code": "1"}, "start the daemon"},
		{ToolRunPython, map[string]any{"code": ""}, "minLength"},
		{ToolRunPython, map[string]any{"code": "1", "timeout_s": 601}, "timeout_s is 601, above its maximum of 600 s: pass at most 600"},
		{ToolRunShell, map[string]any{"command": "ls", "timeout_s": 0}, "timeout_s is 0, below its minimum of 1 s"},
		{ToolRunPython, map[string]any{"code": "1", "extra": true}, "extra"},
		{ToolRunShell, map[string]any{"command": "ls"}, "start the daemon"},
		{ToolReadFile, map[string]any{"path": "/etc/passwd"}, "not reachable"},
		{ToolWriteFile, map[string]any{"path": "a", "content": "!!", "encoding": "base64"}, "base64"},
		{ToolWriteFile, map[string]any{"path": "a", "content": "x", "encoding": "latin1"}, "encoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: tc.name, Arguments: tc.args})
			if err != nil {
				t.Fatalf("protocol error %v, want a tool error", err)
			}
			if !res.IsError {
				t.Fatalf("isError false: %+v", res)
			}
			text := res.Content[0].(*mcpsdk.TextContent).Text
			if !strings.Contains(text, tc.want) {
				t.Fatalf("text %q does not contain %q", text, tc.want)
			}
		})
	}
	if _, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("unknown tool: no protocol error")
	}
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ToolResetSession, Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("reset_session without a session: %+v %v", res, err)
	}
}

// dataSciInfo is a daemon's /v1/info with a data-science zygote on
// "default" and none of the stack on "minimal".
func dataSciInfo() *agentapi.Info {
	return &agentapi.Info{
		DefaultRootfs: "default",
		DefaultLimits: agentapi.Limits{TimeoutMs: 30_000, MemoryBytes: 1 << 30},
		MaxLimits:     agentapi.Limits{TimeoutMs: 120_000, MemoryBytes: 4 << 30},
		Zygotes: []agentapi.ZygoteInfo{
			{Rootfs: "default", State: "ready", Modules: []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot", "scipy", "sklearn"}, Skipped: []string{"sklearn"}},
			{Rootfs: "minimal", State: "unused", Modules: []string{"numpy"}},
		},
		Languages: map[string][]string{
			"default": {"python", "bash", "javascript", "typescript"},
			"minimal": {"python", "bash"},
		},
	}
}

// TestToolDescriptions checks that the tools describe the sandbox the
// daemon gives (rootfs, its modules, limits) and the session mode.
func TestToolDescriptions(t *testing.T) {
	type want struct {
		tool       string
		has        []string // in the description
		hasNot     []string // in the description or the input schema
		maxTimeout float64
		sessionID  bool // offered
	}
	tests := []struct {
		name string
		cfg  Config
		want []want
	}{
		{"data-science rootfs", Config{Info: dataSciInfo()}, []want{
			{ToolRunPython, []string{"rootfs (default)", ": numpy, pandas, matplotlib, scipy.", "stopped after 30 s", "at most 120 s", "1 GiB of memory", "128 KiB of stdout"},
				[]string{"when the server uses", "sklearn"}, 120, true},
			{ToolRunShell, []string{"write_file", "stopped after 30 s"}, nil, 120, true},
		}},
		{"minimal rootfs, own limits", Config{Info: dataSciInfo(), Rootfs: "minimal", Limits: agentapi.Limits{TimeoutMs: 10_000, MemoryBytes: 256 << 20, OutputBytes: 1 << 20}}, []want{
			{ToolRunPython, []string{"(minimal) has the Python standard library only", "stopped after 10 s", "256 MiB of memory", "1 MiB of stdout"}, []string{"pre-imported"}, 120, true},
		}},
		{"network allowed by the operator", Config{Info: dataSciInfo(), Network: &agentapi.Network{Allow: []string{"pypi.org", "files.pythonhosted.org"}}}, []want{
			{ToolRunPython, []string{"network only to pypi.org, files.pythonhosted.org", "pip works"}, []string{"no network"}, 120, true},
			{ToolRunShell, []string{"It has network only to pypi.org"}, []string{"no network"}, 120, true},
		}},
		{"no network by default", Config{Info: dataSciInfo()}, []want{
			{ToolRunPython, []string{"(no network, "}, []string{"pypi"}, 120, true},
			{ToolRunShell, []string{"It has no network and no sudo"}, nil, 120, true},
		}},
		{"javascript", Config{Info: dataSciInfo()}, []want{
			{ToolRunJavaScript, []string{"Node.js", "as the Node REPL shows it", "<cell N>:LINE:COL", "separate from run_python's sandbox", "reset_session discards both",
				"pass typescript: true on it", "The rootfs (default) runs JavaScript", "stopped after 30 s", "1 GiB of memory"}, nil, 120, true},
		}},
		{"javascript without typescript", Config{Info: &agentapi.Info{DefaultRootfs: "node", Languages: map[string][]string{"node": {"python", "bash", "javascript"}}}}, []want{
			{ToolRunJavaScript, []string{"cannot run TypeScript: write plain JavaScript", "(node) runs JavaScript"}, []string{`"typescript"`}, 600, true},
		}},
		{"javascript per-call", Config{Info: dataSciInfo(), SessionMode: SessionPerCall}, []want{
			{ToolRunJavaScript, []string{"fresh sandbox", "Pass typescript: true for TypeScript"}, []string{"session", "persist between", "write_file"}, 120, false},
		}},
		{"no daemon", Config{}, []want{
			{ToolRunPython, []string{"depends on the rootfs", "try an import", "timeout_s may be up to 600 s"}, []string{"memory"}, 600, true},
		}},
		{"per-call", Config{Info: dataSciInfo(), SessionMode: SessionPerCall}, []want{
			{ToolRunPython, []string{"fresh sandbox", "numpy"}, []string{"write_file", "read_file", "session", "files persist"}, 120, false},
			{ToolRunShell, []string{"fresh sandbox"}, []string{"write_file", "read_file", "same sandbox"}, 120, false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := connectConfig(t, tc.cfg).ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			tools := map[string]*mcpsdk.Tool{}
			for _, tool := range res.Tools {
				tools[tool.Name] = tool
			}
			for _, w := range tc.want {
				tool := tools[w.tool]
				for _, s := range w.has {
					if !strings.Contains(tool.Description, s) {
						t.Errorf("%s: description lacks %q: %s", w.tool, s, tool.Description)
					}
				}
				schema, err := json.Marshal(tool.InputSchema)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range w.hasNot {
					if strings.Contains(tool.Description+string(schema), s) {
						t.Errorf("%s: description or schema has %q: %s %s", w.tool, s, tool.Description, schema)
					}
				}
				props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
				timeout := props["timeout_s"].(map[string]any)
				if timeout["maximum"] != w.maxTimeout || timeout["minimum"] != 1.0 || !strings.HasPrefix(timeout["description"].(string), "Whole seconds, 1 to ") {
					t.Errorf("%s: timeout_s %v, want maximum %v", w.tool, timeout, w.maxTimeout)
				}
				if _, ok := props["session_id"]; ok != w.sessionID {
					t.Errorf("%s: session_id offered %v, want %v", w.tool, ok, w.sessionID)
				}
			}
		})
	}
}

// TestPerCallRefusesSessionID checks that per-call mode, which offers no
// session_id, refuses one.
func TestPerCallRefusesSessionID(t *testing.T) {
	cs := connect(t, SessionPerCall)
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ToolRunPython, Arguments: map[string]any{"code": "1", "session_id": "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcpsdk.TextContent).Text; !res.IsError || !strings.Contains(text, "session_id") {
		t.Fatalf("isError %v: %s", res.IsError, text)
	}
}
