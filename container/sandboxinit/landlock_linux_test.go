package sandboxinit

import (
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
