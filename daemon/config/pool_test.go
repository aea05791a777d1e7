package config

import (
	"reflect"
	"slices"
	"testing"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
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
		{Name: "datasci", Rootfs: "default", Limits: big, Preimport: []string{"numpy", "pandas", "matplotlib"}, Size: 2},
	}
	if got := c.PoolProfiles(); !reflect.DeepEqual(got, want) {
		t.Errorf("profiles\n got %+v\nwant %+v", got, want)
	}
	if c.Pool.Refills != 2 {
		t.Errorf("refills %d, want 2", c.Pool.Refills)
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
