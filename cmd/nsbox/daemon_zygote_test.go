package main

import (
	"reflect"
	"slices"
	"testing"

	"github.com/nsbox/nsbox/container/zygote"
)

func TestZygoteConfig(t *testing.T) {
	c, err := loadConfig(t, "--config", "testdata/config/zygote.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := []zygote.Profile{
		{Rootfs: "default", Modules: []string{"numpy", "pandas"}, Children: 8, MemoryBytes: 1 << 30},
		{Rootfs: "other", Modules: []string{"numpy", "pandas"}, Children: 8, MemoryBytes: 1 << 30},
	}
	if got := c.zygoteProfiles(); !reflect.DeepEqual(got, want) {
		t.Errorf("profiles\n got %+v\nwant %+v", got, want)
	}
}

func TestZygoteDefaults(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		rootfs []string
	}{
		{"on for the default rootfs", nil, []string{"default"}},
		{"and every pool's", []string{"--config", "testdata/config/pool.conf"}, []string{"default"}},
		{"off by flag", []string{"--zygote=false"}, nil},
		{"flag over file", []string{"--config", "testdata/config/zygote.conf", "--zygote=false"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range c.zygoteProfiles() {
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
