package service

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/zygote"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/config"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/rootfs"
)

// TestCheckDefaultRootfs: a daemon whose default rootfs is missing is
// refused with the command that builds it and the names the store has; one
// whose default is there starts.
func TestCheckDefaultRootfs(t *testing.T) {
	empty := rootfs.Store{Root: t.TempDir()}
	tests := []struct {
		name, rootfs string
		want         []string
	}{
		{"default", "default", []string{`the default rootfs "default" is not in the store ` + empty.Root, "`nsbox rootfs build --profile datasci --name default`", "make rootfs-default"}},
		{"minimal", "minimal", []string{"`nsbox rootfs build --profile minimal --name minimal`", "make rootfs-test"}},
		{"other", "py", []string{"`nsbox rootfs build --profile minimal --name py`"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDefaultRootfs(empty, tc.rootfs)
			if err == nil {
				t.Fatal("no error for a missing default rootfs")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	storeDir, name := os.Getenv("NSBOX_TEST_ROOTFS_STORE"), os.Getenv("NSBOX_TEST_ROOTFS_NAME")
	if storeDir == "" || name == "" {
		t.Skip("NSBOX_TEST_ROOTFS_STORE and NSBOX_TEST_ROOTFS_NAME unset: no store to check a present rootfs in (make rootfs-test)")
	}
	store := rootfs.Store{Root: storeDir}
	if err := checkDefaultRootfs(store, name); err != nil {
		t.Errorf("present rootfs %q refused: %v", name, err)
	}
	err := checkDefaultRootfs(store, "nsbox-no-such-rootfs")
	if err == nil || !strings.Contains(err.Error(), "it has: ") || !strings.Contains(err.Error(), name) {
		t.Errorf("error %v: want the store's rootfs listed, %s among them", err, name)
	}
}

// TestReloadRefusesMissingDefaultRootfs: a reload naming a default rootfs
// the store lacks is refused before the core sees it.
func TestReloadRefusesMissingDefaultRootfs(t *testing.T) {
	calls := 0
	apply := reloadApply(rootfs.Store{Root: t.TempDir()}, func(policy.Policy) error { calls++; return nil })
	next := config.Default()
	next.DefaultRootfs = "nsbox-no-such-rootfs"
	if err := apply(next); err == nil || !strings.Contains(err.Error(), "nsbox rootfs build") || calls != 0 {
		t.Errorf("apply: %v, core reconfigured %d times; want a refusal naming the build command and none", err, calls)
	}
}

// TestPoolsAndZygotesWhereRunnable: no pool or zygote of Python runners
// is kept on an argv-only rootfs, nor a Node pool on a rootfs without
// node; a Python one on a rootfs the store does not have yet is (it waits
// for it).
func TestPoolsAndZygotesWhereRunnable(t *testing.T) {
	root := t.TempDir()
	for name, meta := range map[string]string{
		"alpine": `{"name": "alpine", "python": "", "argv_only": true}`,
		"py":     `{"name": "py", "python": "3.11.2"}`,
	} {
		if err := os.MkdirAll(filepath.Join(root, name, "rootfs", "usr/bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name, "meta.json"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := daemon.Store{Store: rootfs.Store{Root: root}}
	log := slog.New(slog.DiscardHandler)

	pools := poolsWhereRunnable([]pool.Profile{
		{Name: "default", Rootfs: "alpine"},
		{Name: "node", Rootfs: "alpine", Language: runner.JavaScript},
		{Name: "py", Rootfs: "py"},
		{Name: "node-py", Rootfs: "py", Language: runner.JavaScript},
		{Name: "later", Rootfs: "missing"},
	}, store, log)
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	if want := []string{"py", "later"}; !slices.Equal(names, want) {
		t.Errorf("pools kept: %v, want %v", names, want)
	}

	zygotes := zygotesWhereRunnable([]zygote.Profile{{Rootfs: "alpine"}, {Rootfs: "alpine", Lean: true}, {Rootfs: "py"}, {Rootfs: "missing"}}, store, log)
	names = names[:0]
	for _, z := range zygotes {
		names = append(names, z.Rootfs)
	}
	if want := []string{"py", "missing"}; !slices.Equal(names, want) {
		t.Errorf("zygotes kept on %v, want on %v", names, want)
	}
}
