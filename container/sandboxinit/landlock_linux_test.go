package sandboxinit

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkLandlockRuleset is what Landlock adds to a sandbox's set-up
// before its exec: reading / and building the ruleset (here of the host's
// root, with two mounts; no restrict_self, which would bind the test).
func BenchmarkLandlockRuleset(b *testing.B) {
	abi := min(LandlockABI(), len(llHandled)-1)
	if abi == 0 {
		b.Skip("this kernel has no Landlock")
	}
	for b.Loop() {
		fd, err := landlockRuleset(abi, []string{"data", "vol"})
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}

// TestLandlockModesWithoutLandlock stands in a kernel without Landlock:
// auto runs (and says it is absent), required is refused by the engine's
// check and by init alike, off asks nothing; an unknown mode is an error.
func TestLandlockModesWithoutLandlock(t *testing.T) {
	saved := kernelLandlockABI
	t.Cleanup(func() { kernelLandlockABI = saved })
	kernelLandlockABI = func() int { return 0 }
	for _, tc := range []struct {
		mode, want string
		absent     bool
		err        error
	}{
		{"", LandlockAuto, true, nil},
		{LandlockAuto, LandlockAuto, true, nil},
		{LandlockOff, LandlockOff, false, nil},
		{LandlockRequired, "", true, ErrNoLandlock},
	} {
		got, absent, err := CheckLandlock(tc.mode)
		if got != tc.want || absent != tc.absent || !errors.Is(err, tc.err) {
			t.Errorf("CheckLandlock(%q) = %q, %v, %v; want %q, %v, %v", tc.mode, got, absent, err, tc.want, tc.absent, tc.err)
		}
		// Without Landlock init restricts nothing, so this test process is safe.
		if err := applyLandlock(tc.mode, nil); !errors.Is(err, tc.err) {
			t.Errorf("applyLandlock(%q) = %v, want %v", tc.mode, err, tc.err)
		}
	}
	if _, _, err := CheckLandlock("on"); err == nil || !strings.Contains(err.Error(), "want auto, required or off") {
		t.Errorf("CheckLandlock(on) = %v", err)
	}
}
