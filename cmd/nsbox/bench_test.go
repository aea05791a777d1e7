package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindBench: nsbox bench runs the nsbox-bench beside nsbox, and says
// how to build it when there is none.
func TestFindBench(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "nsbox")
	_, err := findBench(self)
	if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "./cmd/nsbox-bench") {
		t.Fatalf("findBench with none beside: %v; want an error naming make build and ./cmd/nsbox-bench", err)
	}
	bin := filepath.Join(dir, "nsbox-bench")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findBench(self); err == nil {
		t.Fatal("findBench took a file that is not executable")
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findBench(self); err != nil || got != bin {
		t.Fatalf("findBench = %q, %v; want %q", got, err, bin)
	}
}
