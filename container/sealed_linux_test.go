package container

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// CVE-2019-5736: an init is exec'd from a sealed copy of nsbox, never from
// the binary on disk, so nothing that reaches /proc/<init>/exe can rewrite
// the host's nsbox. A spare init is a live init we can look at from the host.
func TestInitRunsFromASealedCopy(t *testing.T) {
	testSpares = 1
	defer func() { testSpares = 0 }()
	e := newTestEngine(t)
	p := e.spares.Take()
	if p == nil {
		t.Fatal("no spare init ready")
	}
	defer p.Destroy()
	exe := fmt.Sprintf("/proc/%d/exe", p.Process.Pid)
	if f, err := os.OpenFile(exe, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Fatalf("%s opened for writing", exe)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var a syscall.Stat_t
	if err := syscall.Stat(exe, &a); err != nil {
		t.Fatal(err)
	}
	for _, disk := range []string{self, testInitBinary} {
		var b syscall.Stat_t
		if disk == "" {
			continue
		}
		if err := syscall.Stat(disk, &b); err != nil {
			t.Fatal(err)
		}
		if a.Dev == b.Dev && a.Ino == b.Ino {
			t.Fatalf("init runs the on-disk binary %s itself, not a sealed copy", disk)
		}
	}
	// The sealed copy is of the init asked for: its size is that binary's.
	if testInitBinary != "" {
		st, err := os.Stat(testInitBinary)
		if err != nil {
			t.Fatal(err)
		}
		if a.Size != st.Size() {
			t.Fatalf("init is %d bytes, %s is %d: not a copy of the standalone init", a.Size, testInitBinary, st.Size())
		}
	}
}
