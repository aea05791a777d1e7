package build

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/rootfs"
)

func TestParseMmdebstrapProgress(t *testing.T) {
	f, err := os.Open("testdata/mmdebstrap-ok.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []rootfs.Progress
	p := parseMmdebstrap(f, func(ev rootfs.Progress) { evs = append(evs, ev) })
	var phases []string
	maxPct := map[string]float64{}
	for _, ev := range evs {
		if len(phases) == 0 || phases[len(phases)-1] != ev.Phase {
			phases = append(phases, ev.Phase)
		}
		if ev.Percent > maxPct[ev.Phase] {
			maxPct[ev.Phase] = ev.Percent
		}
	}
	want := []string{"setup", "download", "extract", "install", "trim"}
	if !reflect.DeepEqual(phases, want) {
		t.Errorf("phases = %v, want %v", phases, want)
	}
	for _, ph := range []string{"download", "extract", "install"} {
		if maxPct[ph] < 90 {
			t.Errorf("phase %s reached %.0f%%, want a percentage from the progress bars", ph, maxPct[ph])
		}
	}
	if _, kind := p.failure(); kind != ErrBuildFailed {
		t.Errorf("failure() on a good run = %v", kind)
	}
}

func TestParseMmdebstrapFailures(t *testing.T) {
	tests := []struct {
		name    string
		input   func(t *testing.T) string
		want    error
		contain string
	}{
		{"mirror", func(t *testing.T) string {
			b, _ := os.ReadFile("testdata/mmdebstrap-mirror.txt")
			return string(b)
		}, ErrMirrorUnreachable, "127.0.0.1"},
		{"disk full", func(*testing.T) string {
			return "I: extracting archives...\r\ndpkg-deb: error: write: No space left on device\r\nE: mmdebstrap failed to run\r\n"
		}, rootfs.ErrNoSpace, "No space"},
		{"other", func(*testing.T) string {
			return "I: installing remaining packages inside the chroot...\nE: Unable to locate package python3-nope\nE: mmdebstrap failed to run\n"
		}, ErrBuildFailed, "python3-nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := parseMmdebstrap(strings.NewReader(tc.input(t)), func(rootfs.Progress) {})
			detail, kind := p.failure()
			if kind != tc.want || !strings.Contains(detail, tc.contain) {
				t.Errorf("failure() = %v, %q; want %v containing %q", kind, detail, tc.want, tc.contain)
			}
		})
	}
}
