package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/lang"
)

// The run tools' names that clients call today (derived with RunTool from
// the daemon's languages).
const (
	ToolRunPython     = "run_python"
	ToolRunJavaScript = "run_javascript"
)

// builtinLangs are this build's languages, as nsbox mcp passes them.
var builtinLangs = lang.BuiltinInfo

// TestRunToolsFromRegistry checks that the run tools are the daemon's
// languages as GET /v1/info describes them: a runner language the server
// was never told of gets its tool run_NAME, its transformed variant a
// switch of it, and runs in a session of its own with its language;
// one-shot languages get none (run_shell is the shell).
func TestRunToolsFromRegistry(t *testing.T) {
	info := dataSciInfo()
	info.LanguageInfo = append(builtinLangs(),
		agentapi.LanguageInfo{Name: "ruby", Title: "Ruby", Description: "Ruby code.", Runner: "ruby", Sessions: true},
		agentapi.LanguageInfo{Name: "rbs", Title: "typed Ruby", Description: "typed Ruby.", Runner: "ruby", Transform: "types", Sessions: true},
		agentapi.LanguageInfo{Name: "r", Title: "R", Description: "R code.", OneShot: true})
	info.Languages["minimal"] = []string{"python", "bash", "ruby", "rbs", "r"}
	fd, cl := newFakeDaemon(t, map[string]string{})
	cs := connectConfig(t, Config{Client: cl, Info: info, Rootfs: "minimal"})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Name == "run_ruby" {
			props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
			if rbs, _ := props["rbs"].(map[string]any); rbs["type"] != "boolean" || !strings.Contains(tool.Description, "separate from run_python's sandbox") {
				t.Errorf("run_ruby: rbs switch %v; description %s", props["rbs"], tool.Description)
			}
		}
	}
	want := []string{ToolRunPython, "run_ruby", ToolRunShell, ToolWriteFile, ToolReadFile, ToolListFiles, ToolForkSession, ToolResetSession}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, st := range []struct {
		args    map[string]any
		isError bool
		want    string
	}{
		{map[string]any{"code": "1", "rbs": true}, false, "rbs:1"},
		{map[string]any{"code": "2"}, false, "rbs:2"}, // a variant's session runs the plain language
		{map[string]any{"code": "3", "rbs": true, "other": true}, true, "other"},
	} {
		res, text := call(t, cs, "run_ruby", st.args)
		if res.IsError != st.isError || !strings.Contains(text, st.want) {
			t.Errorf("run_ruby(%v): isError %v, text %q; want %v, %q", st.args, res.IsError, text, st.isError, st.want)
		}
	}
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if !slices.Equal(fd.created, []string{"rbs"}) {
		t.Errorf("sessions created %v, want [rbs]", fd.created)
	}
}

// TestNoForkWithoutCarry checks that fork_session is offered only where
// the daemon's default language forks.
func TestNoForkWithoutCarry(t *testing.T) {
	langs := builtinLangs()
	for i := range langs {
		langs[i].ForkPark = false
	}
	res, err := connectConfig(t, Config{Languages: langs}).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == ToolForkSession {
			t.Fatal("fork_session listed for a default language that does not fork")
		}
	}
}

// TestRunShellPerCall checks that per-call run_shell runs its cell as a
// run of the daemon's default language (a run must name one).
func TestRunShellPerCall(t *testing.T) {
	fd, cl := newFakeDaemon(t, map[string]string{})
	cs := connectConfig(t, Config{Client: cl, Info: dataSciInfo(), SessionMode: SessionPerCall})
	call(t, cs, ToolRunShell, map[string]any{"command": "true"})
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if !slices.Equal(fd.runs, []string{"python"}) {
		t.Fatalf("runs %v, want one python run", fd.runs)
	}
}
