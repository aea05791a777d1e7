package mcp

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nsbox/nsbox/agentapi/client"
)

// connect serves a Server over an in-memory transport and returns a client
// session of the SDK's own client. The daemon socket does not exist.
func connect(t *testing.T, mode string) *mcpsdk.ClientSession {
	t.Helper()
	srv, err := New(Config{Client: &client.Client{Socket: filepath.Join(t.TempDir(), "none.sock")}, SessionMode: mode})
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
		mode string
		want []string
	}{
		{SessionPerConnection, []string{ToolRunPython, ToolRunShell, ToolWriteFile, ToolReadFile, ToolListFiles, ToolResetSession}},
		{SessionPerCall, []string{ToolRunPython, ToolRunShell}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			cs := connect(t, tc.mode)
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
		{ToolRunPython, map[string]any{"code": "1"}, "is `nsbox daemon` running?"},
		{ToolRunPython, map[string]any{"code": ""}, "minLength"},
		{ToolRunPython, map[string]any{"code": "1", "timeout_s": 601}, "maximum"},
		{ToolRunPython, map[string]any{"code": "1", "extra": true}, "extra"},
		{ToolRunShell, map[string]any{"command": "ls"}, "is `nsbox daemon` running?"},
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
