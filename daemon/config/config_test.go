package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/daemon/policy"

	"github.com/nsbox/nsbox/agentapi"
)

// writeConf writes a config file into a temporary directory.
func writeConf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nsbox.conf")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// errorLines returns "LINE key" for each error of a Load that must fail
// with *Errors.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	var ce *Errors
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Errors", err)
	}
	var got []string
	for _, e := range ce.Errs {
		got = append(got, strings.TrimSpace(fmt.Sprintf("%d %s", e.Line, e.Key)))
		if e.Msg == "" {
			t.Errorf("error without a message: %+v", e)
		}
	}
	return got
}

func TestConfigFull(t *testing.T) {
	c, err := Load("testdata/full.conf", nil)
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
	root := uint32(0)
	if want := (Sessions{Max: 32, IdleTimeout: 5 * time.Minute, MaxLifetime: 2 * time.Hour, IdleAction: "pause", AdminGID: &root, ParkMaxBytes: 1 << 30, ParkRetention: 72 * time.Hour, CommandOutputBytes: 8 << 20}); !reflect.DeepEqual(c.Sessions, want) {
		t.Errorf("sessions = %+v, want %+v (admin group root)", c.Sessions, want)
	}
}

// TestConfigErrors: every error is reported, each with its line, in line
// order; those without a line (cross-key checks on override values) last.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		file      string
		overrides []Override
		want      []string // "LINE key" per error
	}{
		{"errors.conf", nil, []string{"1 sockett", "2 max_concurrent", "3 queue", "4 shutdown_grace", "5 log_level",
			"8 default_limits.memory", "9 default_limits.pids", "10 default_limits.cpus", "11 default_limits.colour",
			"14 max_limits.timeout", "17 profiles.strict.memory", "19 profiles.Bad Name", "23 network.enabled", "25 default_limits"}},
		{"syntax.conf", nil, []string{"4"}},
		{"inline.conf", nil, []string{"4 queue"}},
		{"zygote-errors.conf", nil, []string{"2 zygote.enabled", "3 zygote.children", "4 zygote.memory", "5 zygote.rootfs", "6 zygote.colour"}},
		{"pool-errors.conf", nil, []string{"2 pool.size", "3 pool.refills", "4 pool.preimport", "5 pool.colour", "8 pools.big.timeout", "9 pools.big.memory", "11 pools.default"}},
		{"sessions-errors.conf", nil, []string{"1 sessions", "3 sessions.max", "4 sessions.idle_timeout", "5 sessions.max_lifetime", "6 sessions.colour", "7 sessions.max", "8 sessions.admin_group", "9 sessions.idle_action", "10 sessions.park_retention", "11 sessions.command_output", "12 sessions.command_output"}},
		{"sessions-bounds.conf", nil, []string{"3 sessions.idle_timeout", "4 sessions.max"}},
		{"full.conf", []Override{{"max_concurrent", 0}, {"socket", "rel.sock"}}, []string{"0 socket", "0 max_concurrent"}},
		{"full.conf", []Override{{"sessions.max", 0}, {"sessions.idle_timeout", -time.Second}, {"sessions.max_lifetime", time.Duration(0)}},
			[]string{"0 sessions.max", "0 sessions.idle_timeout", "0 sessions.max_lifetime"}},
		{"full.conf", []Override{{"sessions.max_lifetime", time.Minute}}, []string{"0 sessions.max_lifetime"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tc.file), tc.overrides)
			if got := errorLines(t, err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\ngot  %q\nwant %q", err, got, tc.want)
			}
			if !strings.Contains(err.Error(), "testdata/"+tc.file+":") && tc.want[0][0] != '0' {
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
	// The example's secret file, made for real.
	secret := filepath.Join(t.TempDir(), "github")
	if err := os.WriteFile(secret, []byte("ghp_example"), 0o600); err != nil {
		t.Fatal(err)
	}
	on = bytes.ReplaceAll(on, []byte("/etc/nsbox/secrets/github"), []byte(secret))
	// The example's dataset directory, made for real.
	on = bytes.ReplaceAll(on, []byte("/srv/nsbox/datasets/census"), []byte(t.TempDir()))
	if bytes.Equal(on, data) {
		t.Fatal("found no commented-out setting in the example")
	}
	for name, content := range map[string][]byte{"as-shipped": data, "all-on": on} {
		t.Run(name, func(t *testing.T) {
			if _, err := Load(writeConf(t, string(content)), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	if !bytes.Contains(on, []byte("\n[sessions]\n")) {
		t.Error("the example does not document [sessions]")
	}
}

// TestOverrides: an override beats the file, whatever its type; a key no
// override may set, or a value of the wrong type, is an error.
func TestOverrides(t *testing.T) {
	file := writeConf(t, "socket = \"/file.sock\"\nmax_concurrent = 7\nlog_format = \"json\"\nqueue = 5\n[sessions]\nmax = 3\n")
	c, err := Load(file, []Override{
		{"log_format", "text"}, {"state_dir", "/st"}, {"max_concurrent", 9}, {"shutdown_grace", time.Minute},
		{"sessions.max", 40}, {"sessions.idle_timeout", time.Hour}, {"pool.preimport", "numpy, pandas"}, {"zygote.enabled", false},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/file.sock" || c.MaxConcurrent != 9 || c.LogFormat != "text" || *c.Queue != 5 || c.RootfsStore != "/st/rootfs" ||
		c.ShutdownGrace != time.Minute || c.Sessions.Max != 40 || c.Sessions.IdleTimeout != time.Hour || c.Zygote.Enabled ||
		!reflect.DeepEqual(c.Pool.Preimport, []string{"numpy", "pandas"}) {
		t.Errorf("config = %+v", c)
	}
	c, err = Load(file, []Override{{"queue", 0}, {"pool.preimport", []string{"scipy"}}})
	if err != nil || *c.Queue != 0 || !reflect.DeepEqual(c.Pool.Preimport, []string{"scipy"}) {
		t.Errorf("queue = %v, preimport = %q, err = %v", *c.Queue, c.Pool.Preimport, err)
	}
	_, err = Load(file, []Override{{"max_concurrent", "9"}, {"default_limits.memory", 1}, {"sessions.idle_timeout", 60}})
	if got, want := errorLines(t, err), []string{"0 max_concurrent", "0 default_limits.memory", "0 sessions.idle_timeout"}; !reflect.DeepEqual(got, want) {
		t.Errorf("errors %q, want %q:\n%v", got, want, err)
	}
}

func TestRestartKeys(t *testing.T) {
	a := Default()
	b := a
	b.DefaultLimits.MemoryBytes = 1 << 30
	b.LogLevel = "debug"
	b.Sessions = Sessions{Max: 1, IdleTimeout: time.Second, MaxLifetime: time.Minute}
	if keys := a.RestartKeys(b); len(keys) != 0 {
		t.Errorf("live settings reported as needing a restart: %q", keys)
	}
	q := 3
	b.Socket, b.MaxConcurrent, b.Queue = "/other.sock", a.MaxConcurrent+1, &q
	if keys, want := a.RestartKeys(b), []string{"socket", "max_concurrent", "queue"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("restart keys = %q, want %q", keys, want)
	}
}

// TestPolicy: the live part has its limits filled and the sessions in.
func TestPolicy(t *testing.T) {
	c, err := Load(writeConf(t, "default_rootfs = \"minimal\"\n[default_limits]\nmemory = \"1G\"\n[max_limits]\npids = 100\n[sessions]\nmax = 2\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy()
	d, m := c.Limits()
	if p.DefaultRootfs != "minimal" || p.DefaultLimits != d || p.MaxLimits != m || p.Sessions.Max != 2 || len(p.Profiles) != 3 {
		t.Errorf("policy = %+v", p)
	}
	if d.MemoryBytes != 1<<30 || d.Timeout != 30*time.Second || m.Pids != 100 || m.MemoryBytes != policy.DefaultMaxLimits().MemoryBytes {
		t.Errorf("limits %+v, maxima %+v", d, m)
	}
}

// TestConfigWarnings: a built-in profile above the maxima is a warning (its
// runs are refused), the same value written in the file an error.
func TestConfigWarnings(t *testing.T) {
	c, err := Load(writeConf(t, "[max_limits]\nmemory = \"1G\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Warnings()
	if len(ws) != 1 || ws[0].Key != "profiles.permissive.memory" || ws[0].Line != 0 {
		t.Errorf("warnings = %+v, want one for profiles.permissive.memory", ws)
	}
	_, err = Load(writeConf(t, "[max_limits]\nmemory = \"1G\"\n[profiles.permissive]\nmemory = \"3G\"\n"), nil)
	if err == nil || !strings.Contains(err.Error(), ":4: profiles.permissive.memory") {
		t.Errorf("err = %v, want an error on line 4", err)
	}
}

// FuzzLoad: whatever the file holds, Load (without the file read) returns a config or *Errors
// whose every entry has a message and a line within the file.
func FuzzLoad(f *testing.F) {
	names, err := filepath.Glob("testdata/*.conf")
	if err != nil {
		f.Fatal(err)
	}
	names = append(names, "../../scripts/nsbox.conf.example")
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := load("fuzz.conf", data, nil)
		if err == nil {
			c.Policy()
			c.PoolProfiles()
			c.ZygoteProfiles()
			return
		}
		var ce *Errors
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want *Errors", err)
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, e := range ce.Errs {
			if e.Msg == "" || e.Line < 0 || e.Line > lines {
				t.Errorf("error %+v (file of %d lines)", e, lines)
			}
		}
	})
}
