package cmdline

import (
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

func TestParseVolume(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want agentapi.VolumeMount
		ok   bool
	}{
		{"data", agentapi.VolumeMount{Name: "data"}, true},
		{"data:ro", agentapi.VolumeMount{Name: "data", ReadOnly: true}, true},
		{"data:/mnt/in", agentapi.VolumeMount{Name: "data", Path: "/mnt/in"}, true},
		{"data:/mnt/in:ro", agentapi.VolumeMount{Name: "data", Path: "/mnt/in", ReadOnly: true}, true},
		{":/mnt/in", agentapi.VolumeMount{}, false},
		{"a:b:c:ro", agentapi.VolumeMount{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseVolume(tc.in)
			if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
				t.Errorf("ParseVolume(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}
