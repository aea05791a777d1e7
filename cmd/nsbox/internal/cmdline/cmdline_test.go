package cmdline

import (
	"testing"
	"time"
)

func TestIsFlagToken(t *testing.T) {
	for tok, want := range map[string]bool{
		"--json": true, "-v": true, "--socket=/s": true, "--zygote=false": true, "--pool-size": true,
		"-": false, "--": false, "-1": false, "-0.5": false, "-x + 1": false, "--=x": false, "ID": false, "": false,
	} {
		if got := isFlagToken(tok); got != want {
			t.Errorf("isFlagToken(%q) = %v, want %v", tok, got, want)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 10 * time.Minute: "10m", 90 * time.Second: "1m30s", 500 * time.Millisecond: "500ms",
		2*time.Hour + 5*time.Minute: "2h5m", 30 * time.Second: "30s",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestNearest(t *testing.T) {
	names := []string{"exec", "rootfs", "doctor", "daemon", "session", "repl", "mcp", "tools", "bench"}
	for in, want := range map[string]string{"exce": "exec", "sesion": "session", "rootf": "rootfs", "docter": "doctor", "zzzzzz": ""} {
		if got := nearest(names, in); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
