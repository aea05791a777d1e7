package volume

import (
	"fmt"
	"testing"
)

// BenchmarkCreate1GiB makes and deletes a 1 GiB volume on the disk under
// the test's temp dir (set TMPDIR to the state directory's filesystem):
// what a create costs, reservation included.
func BenchmarkCreate1GiB(b *testing.B) {
	if testing.Short() {
		b.Skip("makes 1 GiB volumes")
	}
	requireRoot(b)
	s, err := Open(b.TempDir(), b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range b.N {
		name := fmt.Sprintf("v%d", i)
		if _, err := s.Create(name, 1<<30, NoOwner); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Delete(name, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
