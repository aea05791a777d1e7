package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/nsbox/nsbox/container/zygote"
)

func TestZygoteConfig(t *testing.T) {
	c, err := Load("testdata/zygote.conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []zygote.Profile{
		{Rootfs: "default", Modules: []string{"numpy", "pandas"}, Children: 8, MemoryBytes: 1 << 30},
		{Rootfs: "other", Modules: []string{"numpy", "pandas"}, Children: 8, MemoryBytes: 1 << 30},
	}
	if got := c.ZygoteProfiles(); !reflect.DeepEqual(got, want) {
		t.Errorf("profiles\n got %+v\nwant %+v", got, want)
	}
	// Bare zygotes are on by default, and the flag overrides the file.
	if d, _ := Load("", nil); !d.ZygoteProfiles()[0].Bare {
		t.Error("bare zygotes should be on by default")
	}
	if c, _ := Load("testdata/zygote.conf", []Override{{"zygote.bare", true}}); !c.ZygoteProfiles()[0].Bare {
		t.Error("--zygote-bare did not override the file's bare = false")
	}
}

func TestZygoteDefaults(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		overrides []Override
		rootfs    []string
	}{
		{"on for the default rootfs", "", nil, []string{"default"}},
		{"and every pool's", "testdata/pool.conf", nil, []string{"default"}},
		{"off by flag", "", []Override{{"zygote.enabled", false}}, nil},
		{"flag over file", "testdata/zygote.conf", []Override{{"zygote.enabled", false}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.file, tc.overrides)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range c.ZygoteProfiles() {
				got = append(got, p.Rootfs)
				if !slices.Equal(p.Modules, zygote.DefaultModules()) || p.Children != 64 || !p.HugePages {
					t.Errorf("profile %+v lacks the defaults", p)
				}
			}
			if !slices.Equal(got, tc.rootfs) {
				t.Errorf("zygotes on %q, want %q", got, tc.rootfs)
			}
		})
	}
}
