package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestParseDaemonConfig(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, c daemonConfig)
	}{
		{"full", `{"socket":"/s","max_concurrent":3,"queue":0,"shutdown_grace":"1m","max_limits":{"memory_bytes":1024}}`, "", func(t *testing.T, c daemonConfig) {
			if c.Socket != "/s" || c.MaxConcurrent != 3 || c.Queue == nil || *c.Queue != 0 ||
				time.Duration(c.ShutdownGrace) != time.Minute || c.MaxLimits.MemoryBytes != 1024 || c.RunDir != "/run/nsbox" {
				t.Errorf("config = %+v", c)
			}
		}},
		{"unknown key", `{"sockett":"/s"}`, `unknown field "sockett"`, nil},
		{"bad duration", `{"shutdown_grace":"soon"}`, "invalid duration", nil},
		{"malformed", `{"socket":`, "unexpected EOF", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseDaemonConfig(strings.NewReader(tc.in), defaultDaemonConfig())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestDaemonConfigPrecedence: flags beat environment, which beats the file.
func TestDaemonConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(file, []byte(`{"socket":"/file.sock","max_concurrent":7,"log_format":"json","queue":5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NSBOX_MAX_CONCURRENT", "9")
	t.Setenv("NSBOX_LOG_FORMAT", "text")
	cmd := daemonCommand()
	var got daemonConfig
	cmd.Action = func(c *cli.Context) error {
		var err error
		got, err = loadDaemonConfig(c)
		return err
	}
	app := &cli.App{Commands: []*cli.Command{cmd}}
	if err := app.Run([]string{"nsbox", "daemon", "--config", file, "--log-format", "json", "--state-dir", "/st"}); err != nil {
		t.Fatal(err)
	}
	if got.Socket != "/file.sock" || got.MaxConcurrent != 9 || got.LogFormat != "json" || *got.Queue != 5 || got.RootfsStore != "/st/rootfs" {
		t.Errorf("config = %+v", got)
	}
}
