package config

import (
	"os"
	"path/filepath"
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

func TestZygoteLeanModules(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		lean       []string // nil: no lean zygote
	}{
		{"default with the default modules", "", zygote.DefaultLeanModules()},
		{"none when modules are the operator's", "[zygote]\nmodules = [\"numpy\", \"scipy\"]\n", nil},
		{"the operator's", "[zygote]\nmodules = [\"numpy\", \"scipy\"]\nlean_modules = [\"numpy\"]\n", []string{"numpy"}},
		{"off", "[zygote]\nlean_modules = []\n", nil},
		{"none when the same as modules", "[zygote]\nmodules = [\"numpy\", \"pandas\"]\nlean_modules = [\"pandas\", \"numpy\"]\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "nsbox.conf")
			if err := os.WriteFile(f, []byte(tc.conf), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			ps := c.ZygoteProfiles()
			if ps[0].Lean {
				t.Fatalf("the first profile is lean: %+v", ps)
			}
			var lean []string
			if len(ps) > 1 {
				if len(ps) != 2 || !ps[1].Lean || ps[1].Bare || ps[1].Rootfs != ps[0].Rootfs || ps[1].Children != ps[0].Children {
					t.Fatalf("profiles %+v, want a main one and a lean one like it on one rootfs", ps)
				}
				lean = ps[1].Modules
			}
			if !slices.Equal(lean, tc.lean) {
				t.Errorf("lean modules %q, want %q", lean, tc.lean)
			}
		})
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
				if p.Lean {
					continue // TestZygoteLeanModules
				}
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
