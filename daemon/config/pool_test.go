package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
	"github.com/nsbox/nsbox/container/runner"
)

func TestPoolConfig(t *testing.T) {
	c, err := Load("testdata/pool.conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := container.DefaultLimits()
	big := d
	big.MemoryBytes, big.CPUs = 1<<30, 2
	want := []pool.Profile{
		{Name: "default", Rootfs: "default", Limits: d, Preimport: []string{"numpy", "pandas"}, Size: 3},
		{Name: "node", Rootfs: "default", Limits: d, Size: 1, Language: runner.JavaScript},
		{Name: "datasci", Rootfs: "default", Limits: big, Preimport: []string{"numpy", "pandas", "matplotlib"}, Size: 2, Language: runner.Python},
		{Name: "js", Rootfs: "default", Limits: d, Size: 2, Language: runner.JavaScript},
	}
	if got := c.PoolProfiles(); !reflect.DeepEqual(got, want) {
		t.Errorf("profiles\n got %+v\nwant %+v", got, want)
	}
	if c.Pool.Refills != 2 {
		t.Errorf("refills %d, want 2", c.Pool.Refills)
	}
	// node_size = 0 drops the built-in Node pool; a bad language is refused.
	c, err = Load(writeConf(t, "[pool]\nnode_size = 0\n"), nil)
	if err != nil || slices.ContainsFunc(c.PoolProfiles(), func(p pool.Profile) bool { return p.Name == "node" }) {
		t.Errorf("node_size = 0: %v %+v", err, c.PoolProfiles())
	}
	if _, err := Load(writeConf(t, "[pools.x]\nlanguage = \"ruby\"\n"), nil); err == nil || !strings.Contains(err.Error(), "python or javascript") {
		t.Errorf("[pools.x] language = ruby: %v", err)
	}
	if _, err := Load(writeConf(t, "[pools.node]\nsize = 1\n"), nil); err == nil || !strings.Contains(err.Error(), "configured in [pool]") {
		t.Errorf("[pools.node]: %v", err)
	}
}

func TestPoolFlags(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		overrides []Override
		size      int
		preimport []string
	}{
		{"default on, sized for the host", "", nil, defaultPoolSize(), nil},
		{"flag size and preimport", "", []Override{{"pool.size", 5}, {"pool.preimport", "numpy, pandas"}}, 5, []string{"numpy", "pandas"}},
		{"flag over file", "testdata/pool.conf", []Override{{"pool.size", 1}}, 1, []string{"numpy", "pandas"}},
		{"off", "", []Override{{"pool.size", 0}}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.file, tc.overrides)
			if err != nil {
				t.Fatal(err)
			}
			ps := c.PoolProfiles()
			i := slices.IndexFunc(ps, func(p pool.Profile) bool { return p.Name == "default" })
			switch {
			case tc.size == 0 && i >= 0:
				t.Fatalf("default pool %+v with size 0", ps[i])
			case tc.size == 0:
				return
			case i < 0:
				t.Fatalf("no default pool in %+v", ps)
			}
			if ps[i].Size != tc.size || !slices.Equal(ps[i].Preimport, tc.preimport) || ps[i].Rootfs != c.DefaultRootfs {
				t.Errorf("default pool %+v, want size %d preimport %q on %s", ps[i], tc.size, tc.preimport, c.DefaultRootfs)
			}
		})
	}
}
