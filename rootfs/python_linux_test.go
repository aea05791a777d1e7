package rootfs

import "testing"

func TestPythonSupported(t *testing.T) {
	for v, want := range map[string]bool{"3.9": true, "3.11.2": true, "3.12": true, "4.0": true, "3.8.18": false, "2.7.18": false, "": false, "3": false, "x.y": false} {
		if PythonSupported(v) != want {
			t.Errorf("PythonSupported(%q) = %v", v, !want)
		}
	}
}
