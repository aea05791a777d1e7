package service

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/daemon/config"
)

func TestReload(t *testing.T) {
	started := config.Default()
	debug := config.Default()
	debug.LogLevel = "debug"
	moved := debug
	moved.Socket = "/elsewhere.sock"
	badFile := &config.Errors{File: "/etc/nsbox/nsbox.conf", Errs: []config.Error{{Line: 3, Key: "max_concurrent", Msg: "must be at least 1"}}}
	tests := []struct {
		name      string
		next      config.Config
		loadErr   error
		applyErr  error
		wantLevel slog.Level
		wantLog   []string
	}{
		{name: "applied", next: debug, wantLevel: slog.LevelDebug, wantLog: []string{"reload: configuration applied"}},
		{name: "restart-only key changed", next: moved, wantLevel: slog.LevelDebug,
			wantLog: []string{"reload: configuration applied", "take effect only after a restart", "socket"}},
		{name: "errors in the file", loadErr: badFile, wantLevel: slog.LevelInfo,
			wantLog: []string{"/etc/nsbox/nsbox.conf:3", "reload: configuration rejected"}},
		{name: "refused by the core", next: debug, applyErr: errors.New("no such rootfs"), wantLevel: slog.LevelInfo,
			wantLog: []string{"reload: configuration rejected", "no such rootfs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			level := new(slog.LevelVar)
			applied := 0
			r := &reloader{
				load:    func() (config.Config, error) { return tc.next, tc.loadErr },
				started: started,
				apply:   func(config.Config) error { applied++; return tc.applyErr },
				level:   level,
				log:     slog.New(slog.NewTextHandler(&buf, nil)),
				status:  "serving",
			}
			r.reload()
			if level.Level() != tc.wantLevel {
				t.Errorf("level %v, want %v", level.Level(), tc.wantLevel)
			}
			if wantApplied := tc.loadErr == nil; (applied == 1) != wantApplied {
				t.Errorf("apply called %d times, want it called: %v", applied, wantApplied)
			}
			for _, want := range tc.wantLog {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, buf.String())
				}
			}
		})
	}
}
