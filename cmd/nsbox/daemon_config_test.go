package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/urfave/cli/v2"
)

// loadConfig runs `nsbox daemon ARGS` far enough to load its configuration.
func loadConfig(t *testing.T, args ...string) (daemonConfig, error) {
	t.Helper()
	cmd := daemonCommand()
	var (
		got  daemonConfig
		lerr error
	)
	cmd.Action = func(c *cli.Context) error {
		got, lerr = loadDaemonConfig(c)
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{cmd}}
	if err := app.Run(append([]string{"nsbox", "daemon"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got, lerr
}

func TestConfigFull(t *testing.T) {
	c, err := loadConfig(t, "--config", "testdata/config/full.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/s/nsbox.sock" || c.StateDir != "/st" || c.RunDir != "/r" || c.RootfsStore != "/store" || c.DefaultRootfs != "minimal" ||
		c.CgroupName != "nsbox-x" || c.MaxConcurrent != 3 || c.Queue == nil || *c.Queue != 0 || c.ShutdownGrace != time.Minute ||
		c.LogFormat != "json" || c.LogLevel != "debug" || c.MetricsListen != "127.0.0.1:9464" {
		t.Errorf("config = %+v", c)
	}
	wantDef := agentapi.Limits{TimeoutMs: 20000, MemoryBytes: 256 << 20, Pids: 1000, CPUs: 0.5, DiskBytes: 1 << 20, OutputBytes: 64 << 10}
	if c.DefaultLimits != wantDef {
		t.Errorf("default limits = %+v, want %+v", c.DefaultLimits, wantDef)
	}
	if want := (agentapi.Limits{MemoryBytes: 4 << 30, CPUs: 2}); c.MaxLimits != want {
		t.Errorf("max limits = %+v, want %+v", c.MaxLimits, want)
	}
	profiles := map[string]agentapi.Profile{}
	for _, p := range c.Profiles {
		profiles[p.Name] = p
	}
	strict := agentapi.BuiltinProfiles()[0].Limits
	strict.MemoryBytes = 128 << 20
	if got := profiles["strict"].Limits; got != strict {
		t.Errorf("strict = %+v, want the built-in with memory 128 MiB: %+v", got, strict)
	}
	if got := profiles["data"]; got.Description != "big data" || got.Limits != (agentapi.Limits{MemoryBytes: 2 << 30, TimeoutMs: 300000}) {
		t.Errorf("data = %+v", got)
	}
	if len(c.Profiles) != 4 {
		t.Errorf("profiles = %d, want the 3 built-ins and data", len(c.Profiles))
	}
}

// TestConfigErrors: every error is reported, each with its line, in line
// order; those without a line (cross-key checks on flag values) last.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		file string
		args []string
		want []string // "LINE key" per error
	}{
		{"errors.conf", nil, []string{"1 sockett", "2 max_concurrent", "3 queue", "4 shutdown_grace", "5 log_level",
			"8 default_limits.memory", "9 default_limits.pids", "10 default_limits.cpus", "11 default_limits.colour",
			"14 max_limits.timeout", "17 profiles.strict.memory", "19 profiles.Bad Name", "22 network", "25 default_limits"}},
		{"syntax.conf", nil, []string{"4 "}},
		{"inline.conf", nil, []string{"4 queue"}},
		{"zygote-errors.conf", nil, []string{"2 zygote.enabled", "3 zygote.children", "4 zygote.memory", "5 zygote.rootfs", "6 zygote.colour"}},
		{"full.conf", []string{"--max-concurrent", "0", "--socket", "rel.sock"}, []string{"0 socket", "0 max_concurrent"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, err := loadConfig(t, append([]string{"--config", filepath.Join("testdata/config", tc.file)}, tc.args...)...)
			ce, ok := err.(*configErrors)
			if !ok {
				t.Fatalf("err = %v, want *configErrors", err)
			}
			var got []string
			for _, e := range ce.Errs {
				got = append(got, strings.TrimSpace(fmt.Sprintf("%d %s", e.Line, e.Key)))
				if e.Msg == "" {
					t.Errorf("error without a message: %+v", e)
				}
			}
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.TrimSpace(w)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("errors:\n%s\ngot  %q\nwant %q", err, got, want)
			}
			if !strings.Contains(err.Error(), "testdata/config/"+tc.file+":") && tc.want[0][0] != '0' {
				t.Errorf("message does not name FILE:LINE:\n%s", err)
			}
		})
	}
}

// TestConfigExample: the shipped example is valid as is and with every
// commented-out setting switched on.
func TestConfigExample(t *testing.T) {
	data, err := os.ReadFile("../../scripts/nsbox.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	on := regexp.MustCompile(`(?m)^#(\[|[a-z_]+ = )`).ReplaceAll(data, []byte("$1"))
	if bytes.Equal(on, data) {
		t.Fatal("found no commented-out setting in the example")
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{"as-shipped": data, "all-on": on} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".conf")
			if err := os.WriteFile(p, content, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := loadConfig(t, "--config", p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConfigPrecedence: flags beat environment, which beats the file.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("socket = \"/file.sock\"\nmax_concurrent = 7\nlog_format = \"json\"\nqueue = 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NSBOX_MAX_CONCURRENT", "9")
	t.Setenv("NSBOX_LOG_FORMAT", "text")
	got, err := loadConfig(t, "--config", file, "--log-format", "json", "--state-dir", "/st")
	if err != nil {
		t.Fatal(err)
	}
	if got.Socket != "/file.sock" || got.MaxConcurrent != 9 || got.LogFormat != "json" || *got.Queue != 5 || got.RootfsStore != "/st/rootfs" {
		t.Errorf("config = %+v", got)
	}
}

func TestRestartKeys(t *testing.T) {
	a := defaultDaemonConfig()
	b := a
	b.DefaultLimits.MemoryBytes = 1 << 30
	b.LogLevel = "debug"
	if keys := restartKeys(a, b); len(keys) != 0 {
		t.Errorf("live settings reported as needing a restart: %q", keys)
	}
	q := 3
	b.Socket, b.MaxConcurrent, b.Queue = "/other.sock", a.MaxConcurrent+1, &q
	if keys, want := restartKeys(a, b), []string{"socket", "max_concurrent", "queue"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("restart keys = %q, want %q", keys, want)
	}
}

// TestConfigWarnings: a built-in profile above the maxima is a warning (its
// runs are refused), the same value written in the file an error.
func TestConfigWarnings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("[max_limits]\nmemory = \"1G\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	ws := c.warnings()
	if len(ws) != 1 || ws[0].Key != "profiles.permissive.memory" || ws[0].Line != 0 {
		t.Errorf("warnings = %+v, want one for profiles.permissive.memory", ws)
	}
	if err := os.WriteFile(file, []byte("[max_limits]\nmemory = \"1G\"\n[profiles.permissive]\nmemory = \"3G\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(t, "--config", file); err == nil || !strings.Contains(err.Error(), ":4: profiles.permissive.memory") {
		t.Errorf("err = %v, want an error on line 4", err)
	}
}

func FuzzParseConfigFile(f *testing.F) {
	for _, name := range []string{"full.conf", "errors.conf", "syntax.conf", "inline.conf"} {
		data, err := os.ReadFile(filepath.Join("testdata/config", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := defaultDaemonConfig()
		for _, e := range parseConfigFile(data, &cfg) {
			if e.Msg == "" {
				t.Errorf("error without a message: %+v", e)
			}
		}
	})
}
