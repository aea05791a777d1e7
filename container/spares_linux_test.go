package container

import "testing"

// The isolation and limit guarantees hold for runs served by spare inits
// (cloned and placed ahead of time) exactly as for cold ones: the same
// tests, on an engine that keeps spares and asserts they were used.
func TestIsolationWithSpareInits(t *testing.T) {
	testSpares = 2
	defer func() { testSpares = 0 }()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
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
	} {
		t.Run(tc.name, tc.fn)
	}
}
