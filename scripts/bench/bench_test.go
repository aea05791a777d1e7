package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// defaults are the options `nsbox bench` runs with when given no flags.
func defaults() Options {
	return Options{
		Store: "/var/lib/nsbox/rootfs", Rootfs: "minimal",
		Runs: 100, Round: time.Second, Rounds: 3, Concurrency: []int{1, 2, 8},
		DaemonRuns: 100, PandasRuns: 10,
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Options)
		wantErr string // "" for none
	}{
		{"defaults", func(*Options) {}, ""},
		{"only engine", func(o *Options) { o.Only = "engine" }, ""},
		{"only daemon", func(o *Options) { o.Only = "daemon" }, ""},
		{"only egress", func(o *Options) { o.Only = "egress" }, ""},
		{"only e2b", func(o *Options) { o.Only = "e2b" }, ""},
		{"only node", func(o *Options) { o.Only = "node" }, ""},
		{"only ports", func(o *Options) { o.Only = "ports" }, ""},
		{"only landlock", func(o *Options) { o.Only = "landlock" }, ""},
		{"only landlock at a socket", func(o *Options) { o.Only, o.Socket = "landlock", "/run/nsbox.sock" }, "bench: --only landlock measures private daemons: drop --socket"},
		{"smallest counts", func(o *Options) {
			o.Runs, o.Rounds, o.DaemonRuns, o.PandasRuns, o.Round, o.Concurrency = 1, 1, 1, 1, time.Millisecond, []int{1}
		}, ""},
		{"only zygote", func(o *Options) { o.Only = "zygote" }, ""},
		{"only zygote at a socket", func(o *Options) { o.Only, o.Socket = "zygote", "/run/nsbox.sock" }, "bench: --only zygote measures private daemons: drop --socket"},
		{"only unknown", func(o *Options) { o.Only = "zygotes" }, `bench: --only "zygotes": use engine, daemon, zygote, egress, e2b, node, state, ports or landlock`},
		{"no runs", func(o *Options) { o.Runs = 0 }, "bench: --runs 0: must be at least 1"},
		{"no rounds", func(o *Options) { o.Rounds = 0 }, "bench: --rounds 0: must be at least 1"},
		{"negative daemon runs", func(o *Options) { o.DaemonRuns = -1 }, "bench: --daemon-runs -1: must be at least 1"},
		{"no pandas runs", func(o *Options) { o.PandasRuns = 0 }, "bench: --pandas-runs 0: must be at least 1"},
		{"zero round", func(o *Options) { o.Round = 0 }, "bench: --round 0s: must be positive"},
		{"no concurrency", func(o *Options) { o.Concurrency = nil }, "bench: --concurrency: give at least one"},
		{"zero concurrency", func(o *Options) { o.Concurrency = []int{1, 0} }, "bench: --concurrency 0: must be at least 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults()
			tc.change(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v, want no error", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("Validate: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRunValidatesFirst: bad options are refused before anything needs
// root or a rootfs.
func TestRunValidatesFirst(t *testing.T) {
	o := defaults()
	o.Only = "both"
	o.Store = t.TempDir()
	var out strings.Builder
	err := Run(context.Background(), o, &out)
	if err == nil || !strings.Contains(err.Error(), "--only") {
		t.Fatalf("Run: %v, want the --only error", err)
	}
	if out.Len() != 0 {
		t.Fatalf("Run wrote %q before failing", out.String())
	}
}

func TestNsboxBinary(t *testing.T) {
	o := defaults()
	o.Nsbox = "/opt/nsbox"
	if got, err := o.nsbox(); err != nil || got != "/opt/nsbox" {
		t.Fatalf("nsbox() = %q, %v; want /opt/nsbox", got, err)
	}
	// Empty: "nsbox" beside this executable, the test binary, which has
	// none beside it in its temp dir.
	o.Nsbox = ""
	got, err := o.nsbox()
	if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "--nsbox") {
		t.Fatalf("nsbox() = %q, %v; want an error naming make build and --nsbox", got, err)
	}
}

// TestRunSectionsGoesOn: a section that fails is recorded and the ones
// after it still run; --only selects by the section's names; an ended
// context runs nothing more.
func TestRunSectionsGoesOn(t *testing.T) {
	var ran []string
	sec := func(name, only string, err error) part {
		return part{name, only, func() error { ran = append(ran, name); return err }}
	}
	secs := []part{sec("a", "a", nil), sec("b", "b bb", errors.New("503 after 10 tries")), sec("c", "c", nil)}
	rep := &report{}
	runSections(context.Background(), "", rep, secs)
	if !slices.Equal(ran, []string{"a", "b", "c"}) || !slices.Equal(rep.Failed, []string{"b: 503 after 10 tries"}) {
		t.Errorf("ran %v, failed %q; want a b c and b's error", ran, rep.Failed)
	}
	ran, rep = nil, &report{}
	runSections(context.Background(), "bb", rep, secs)
	if !slices.Equal(ran, []string{"b"}) {
		t.Errorf("--only bb ran %v, want b", ran)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran = nil
	runSections(ctx, "", &report{}, secs)
	if len(ran) != 0 {
		t.Errorf("an ended context ran %v", ran)
	}
}
