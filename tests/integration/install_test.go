package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeInstall: `make install DESTDIR=… PREFIX=/usr` lays out the binaries,
// the units (ExecStart pointing at PREFIX), the config and the docs, keeps
// an existing config, creates no group while staging; `make uninstall`
// removes all but the config.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("requires make: ", err)
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("requires /bin/bash (the Makefile's shell): ", err)
	}
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "nsbox")
	if err := os.WriteFile(filepath.Join(filepath.Dir(bin), "nsbox-init"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(bin), "nsbox-bench"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(target string) {
		t.Helper()
		cmd := exec.Command("make", "-C", repoRoot, target, "DESTDIR="+dest, "PREFIX=/usr", "BIN="+bin, "INIT_BIN="+filepath.Join(filepath.Dir(bin), "nsbox-init"),
			"BENCH_BIN="+filepath.Join(filepath.Dir(bin), "nsbox-bench"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	mk("install")
	want := map[string]os.FileMode{
		"usr/bin/nsbox":                          0o755,
		"usr/bin/nsbox-init":                     0o755,
		"usr/bin/nsbox-bench":                    0o755, // `nsbox bench` runs it from beside nsbox
		"etc/systemd/system/nsbox.service":       0o644,
		"etc/systemd/system/nsbox.socket":        0o644,
		"etc/nsbox/nsbox.conf":                   0o644,
		"usr/share/doc/nsbox/nsbox.conf.example": 0o644,
		"usr/share/doc/nsbox/OPERATIONS.md":      0o644,
		"usr/share/doc/nsbox/SECURITY.md":        0o644,
	}
	for p, mode := range want {
		fi, err := os.Stat(filepath.Join(dest, p))
		if err != nil {
			t.Errorf("missing %s: %v", p, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), mode)
		}
	}
	unit, err := os.ReadFile(filepath.Join(dest, "etc/systemd/system/nsbox.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/nsbox daemon --config /etc/nsbox/nsbox.conf\n") {
		t.Errorf("installed unit's ExecStart does not point at PREFIX/bin:\n%s", unit)
	}

	conf := filepath.Join(dest, "etc/nsbox/nsbox.conf")
	if err := os.WriteFile(conf, []byte("queue = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk("install")
	if got, _ := os.ReadFile(conf); string(got) != "queue = 1\n" {
		t.Errorf("a second install overwrote the config: %q", got)
	}

	mk("uninstall")
	for p := range want {
		_, err := os.Stat(filepath.Join(dest, p))
		if p == "etc/nsbox/nsbox.conf" {
			if err != nil {
				t.Errorf("uninstall removed the config: %v", err)
			}
		} else if err == nil {
			t.Errorf("uninstall left %s", p)
		}
	}
}
