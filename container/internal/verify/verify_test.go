package verify

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

func TestParseStatus(t *testing.T) {
	b, err := os.ReadFile("testdata/child-status")
	if err != nil {
		t.Fatal(err)
	}
	st := parseStatus(b)
	for k, want := range map[string]string{
		"Uid":        "1610612737 1610612737 1610612737 1610612737",
		"Groups":     "",
		"NSpid":      "51234 7 1",
		"CapBnd":     "0000000000000000",
		"Seccomp":    "2",
		"NoNewPrivs": "1",
		"Threads":    "1",
	} {
		if got, ok := st[k]; !ok || fields(got) != want {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, want)
		}
	}
}

func TestNamespacesOfSelf(t *testing.T) {
	ns, err := Namespaces("self")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range NamespaceKinds {
		if ns[k] == "" {
			t.Errorf("no %s namespace read", k)
		}
	}
}

// The verification reads /proc/<pid>/status twice and the namespace links
// once per zygote fork. These compare the hand parser with
// github.com/prometheus/procfs on the same reads (this process stands in
// for the child); docs/ARCHITECTURE.md records the figures.
func BenchmarkStatusHand(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := Status(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStatusProcfs(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		p, err := procfs.NewProc(pid)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.NewStatus(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNamespacesHand(b *testing.B) {
	pid := strconv.Itoa(os.Getpid())
	for b.Loop() {
		if _, err := Namespaces(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNamespacesProcfs(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		p, err := procfs.NewProc(pid)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Namespaces(); err != nil {
			b.Fatal(err)
		}
	}
}

// This process is no sandbox: Sandboxed reads its /proc files and refuses
// it on its first check; a pid that does not exist fails on the open of
// its /proc directory, named in the error.
func TestSandboxedRefuses(t *testing.T) {
	err := Sandboxed(os.Getpid(), Want{HostID: os.Getuid() + 1})
	if err == nil || !strings.HasPrefix(err.Error(), "Uid is ") {
		t.Errorf("Sandboxed(self) = %v, want a refusal on Uid", err)
	}
	const gone = 1 << 30 // above pid_max's ceiling (4194304)
	_, err = Status(gone)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "/proc/"+strconv.Itoa(gone)) {
		t.Errorf("Status(%d) = %v, want ENOENT naming its /proc directory", gone, err)
	}
}
