package container

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// The isolation and limit guarantees hold for runs served by spare inits
// (cloned and placed ahead of time) exactly as for cold ones: the same
// tests, on an engine that keeps spares and asserts they were used.
func TestIsolationWithSpareInits(t *testing.T) {
	testSpares = 2
	defer func() { testSpares = 0 }()
	for _, tc := range isolationSuite() {
		t.Run(tc.name, tc.fn)
	}
}

// The same suite with the standalone init binary (cmd/nsbox-init, what
// `make install` puts next to nsbox) instead of this binary re-executed.
func TestIsolationWithStandaloneInit(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool to build cmd/nsbox-init")
	}
	bin := filepath.Join(t.TempDir(), "nsbox-init")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/nsbox-init")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/nsbox-init: %v\n%s", err, out)
	}
	testInitBinary = bin
	defer func() { testInitBinary = "" }()
	for _, tc := range isolationSuite() {
		t.Run(tc.name, tc.fn)
	}
}

// The same suite with Spec.Init (pid 1 is the reaper, the command its
// child): its limits hold as without, the pids limit exactly (the fork
// bomb gets no more children), with the init re-executed from this binary
// and with the standalone one.
func TestIsolationWithInit(t *testing.T) {
	testInit = true
	defer func() { testInit = false }()
	t.Run("self", func(t *testing.T) {
		for _, tc := range isolationSuite() {
			t.Run(tc.name, tc.fn)
		}
	})
	t.Run("standalone", TestIsolationWithStandaloneInit)
}

// The same suite with every Python run forked by a zygote (a
// pre-started interpreter): each child must end up exactly as isolated and
// limited as a cold run. Commands other than python3 -c (shell, missing
// commands) still run on the engine; the sealed-init test is about the
// engine's init and does not apply.
func TestIsolationWithZygote(t *testing.T) {
	testZygote = true
	defer func() { testZygote = false }()
	for _, tc := range isolationSuite() {
		if tc.name == "InitRunsFromASealedCopy" {
			continue
		}
		t.Run(tc.name, tc.fn)
	}
}

// The same suite on sandboxes with the egress proxy's listener in their
// network namespace (what a run with a network policy gets), cold and
// forked from a zygote: the listener adds a way to the daemon's proxy and
// nothing else.
func TestIsolationWithEgressListener(t *testing.T) {
	testListener = true
	defer func() { testListener = false }()
	for _, zygote := range []bool{false, true} {
		name := "cold"
		if zygote {
			name = "zygote"
		}
		t.Run(name, func(t *testing.T) {
			testZygote = zygote
			defer func() { testZygote = false }()
			for _, tc := range isolationSuite() {
				if tc.name == "InitRunsFromASealedCopy" && zygote {
					continue
				}
				t.Run(tc.name, tc.fn)
			}
		})
	}
}

type namedTest struct {
	name string
	fn   func(*testing.T)
}

func isolationSuite() []namedTest {
	return []namedTest{
		{"RunPrint", TestRunPrint},
		{"RootfsIsReadOnly", TestRootfsIsReadOnly},
		{"CredentialsAndCapabilities", TestCredentialsAndCapabilities},
		{"DangerousSyscallsRefused", TestDangerousSyscallsRefused},
		{"NetworkIsLoopbackOnly", TestNetworkIsLoopbackOnly},
		{"HostIsInvisible", TestHostIsInvisible},
		{"ProcMasked", TestProcMasked},
		{"MemoryLimitOOM", TestMemoryLimitOOM},
		{"ForkBombContained", TestForkBombContained},
		{"TimeoutKillsWholeTree", TestTimeoutKillsWholeTree},
		{"BackgroundProcessDiesWithRun", TestBackgroundProcessDiesWithRun},
		{"OutputFloodStopsAtCap", TestOutputFloodStopsAtCap},
		{"WorkspaceAndTmpCaps", TestWorkspaceAndTmpCaps},
		{"CleanEnvironment", TestCleanEnvironment},
		{"StdinAndFiles", TestStdinAndFiles},
		{"ConcurrentSandboxesGetDistinctHostIDs", TestConcurrentSandboxesGetDistinctHostIDs},
		{"ControlSocket", TestControlSocket},
		{"CustomSeccompProfile", TestCustomSeccompProfile},
		{"InitRunsFromASealedCopy", TestInitRunsFromASealedCopy},
	}
}
