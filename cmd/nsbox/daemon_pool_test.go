package main

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/pool"
)

func TestPoolConfig(t *testing.T) {
	c, err := loadConfig(t, "--config", "testdata/config/pool.conf")
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
	if got := c.poolProfiles(); !reflect.DeepEqual(got, want) {
		t.Errorf("profiles\n got %+v\nwant %+v", got, want)
	}
	if c.Pool.Refills != 2 {
		t.Errorf("refills %d, want 2", c.Pool.Refills)
	}
}

func TestPoolFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		size      int
		preimport []string
	}{
		{"default on, sized for the host", nil, defaultPoolSize(), nil},
		{"flag size and preimport", []string{"--pool-size", "5", "--pool-preimport", "numpy, pandas"}, 5, []string{"numpy", "pandas"}},
		{"flag over file", []string{"--config", "testdata/config/pool.conf", "--pool-size", "1"}, 1, []string{"numpy", "pandas"}},
		{"off", []string{"--pool-size", "0"}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			ps := c.poolProfiles()
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

func TestPoolConfigErrors(t *testing.T) {
	_, err := loadConfig(t, "--config", "testdata/config/pool-errors.conf")
	var ce *configErrors
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want configErrors", err)
	}
	var got []string
	for _, e := range ce.Errs {
		got = append(got, fmt.Sprintf("%d %s", e.Line, e.Key))
	}
	want := []string{"2 pool.size", "3 pool.refills", "4 pool.preimport", "5 pool.colour", "8 pools.big.timeout", "9 pools.big.memory", "11 pools.default"}
	if !slices.Equal(got, want) {
		t.Errorf("errors\n got %q\nwant %q\n%v", got, want, err)
	}
}
