package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

func TestDefaults(t *testing.T) {
	want := Set{Timeout: 30 * time.Second, MemoryBytes: 512 << 20, Pids: 64, CPUs: 1, DiskBytes: 256 << 20, OutputBytes: 1 << 20}
	if got := Defaults(); got != want {
		t.Fatalf("Defaults() = %+v, want %+v", got, want)
	}
}

func TestWireRoundTrip(t *testing.T) {
	w := agentapi.Limits{TimeoutMs: 1500, MemoryBytes: 3 << 30, Pids: 7, CPUs: 0.25, DiskBytes: 5 << 20, OutputBytes: 4096}
	s := FromWire(w)
	if s.Timeout != 1500*time.Millisecond || s.MemoryBytes != 3<<30 || s.Pids != 7 || s.CPUs != 0.25 || s.DiskBytes != 5<<20 || s.OutputBytes != 4096 {
		t.Fatalf("FromWire(%+v) = %+v", w, s)
	}
	if back := ToWire(s); back != w {
		t.Fatalf("ToWire(FromWire(w)) = %+v, want %+v", back, w)
	}
	// A timeout too large for a Duration saturates rather than wrapping
	// to a negative one.
	if s := FromWire(agentapi.Limits{TimeoutMs: 1 << 62}); s.Timeout <= 0 {
		t.Fatalf("huge timeout became %v", s.Timeout)
	}
}

func TestOrAndSandbox(t *testing.T) {
	s := Set{MemoryBytes: 1 << 30, Timeout: time.Second}.Or(Defaults())
	if s.MemoryBytes != 1<<30 || s.Timeout != time.Second || s.Pids != 64 || s.OutputBytes != 1<<20 {
		t.Fatalf("Or = %+v", s)
	}
	sb := s.Sandbox()
	if sb.Timeout != 0 || sb.OutputBytes != 0 || sb.MemoryBytes != 1<<30 || sb.Pids != 64 {
		t.Fatalf("Sandbox = %+v", sb)
	}
}

func TestCheckWire(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     agentapi.Limits
		field string // "" for valid
		msg   string
	}{
		{"absent", agentapi.Limits{}, "", ""},
		{"minimums", agentapi.Limits{TimeoutMs: 1, MemoryBytes: 8 << 20, Pids: 2, CPUs: 0.01, DiskBytes: 1 << 20, OutputBytes: 1}, "", ""},
		{"memory below", agentapi.Limits{MemoryBytes: 1}, "limits.memory_bytes", "below the minimum 8388608"},
		{"pids below", agentapi.Limits{Pids: 1}, "limits.pids", "below the minimum 2"},
		{"cpus below", agentapi.Limits{CPUs: 0.001}, "limits.cpus", "below the minimum 0.01"},
		{"disk below", agentapi.Limits{DiskBytes: 4096}, "limits.disk_bytes", "below the minimum"},
		{"negative timeout", agentapi.Limits{TimeoutMs: -1}, "limits.timeout_ms", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field, err := CheckWire(tc.l)
			if field != tc.field || (err == nil) != (tc.field == "") {
				t.Fatalf("CheckWire = %q, %v; want field %q", field, err, tc.field)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		key, in string
		want    float64
		out     string
	}{
		{"timeout", "1m", 60_000, "1m"},
		{"memory", "512M", 512 << 20, "512 MiB"},
		{"pids", "64", 64, "64"},
		{"cpus", "0.5", 0.5, "0.5"},
	} {
		r, ok := Lookup(tc.key)
		if !ok {
			t.Fatalf("no row %q", tc.key)
		}
		v, err := r.Parse(tc.in)
		if err != nil || v != tc.want {
			t.Fatalf("%s.Parse(%q) = %v, %v; want %v", tc.key, tc.in, v, err, tc.want)
		}
		if got := r.Format(v); got != tc.out {
			t.Fatalf("%s.Format(%v) = %q, want %q", tc.key, v, got, tc.out)
		}
	}
}
