package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/workspace"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/volume"
)

// fakeVolumes knows the volumes in dirs and counts what is held.
type fakeVolumes struct {
	dirs map[string]string
	mu   sync.Mutex
	held int
}

func (f *fakeVolumes) Create(name string, size int64) (volume.Info, error) {
	return volume.Info{}, errors.New("not in this test")
}
func (f *fakeVolumes) List() []volume.Info { return nil }
func (f *fakeVolumes) Get(name string) (volume.Info, error) {
	return volume.Info{}, errors.New("not in this test")
}
func (f *fakeVolumes) Delete(name string) error { return errors.New("not in this test") }
func (f *fakeVolumes) Files(name string) (*workspace.Workspace, error) {
	return nil, errors.New("not in this test")
}

func (f *fakeVolumes) Acquire(name string) (string, func(), error) {
	d, ok := f.dirs[name]
	if !ok {
		return "", nil, fmt.Errorf("volume %q: %w", name, volume.ErrNotFound)
	}
	f.mu.Lock()
	f.held++
	f.mu.Unlock()
	var once sync.Once
	return d, func() {
		once.Do(func() {
			f.mu.Lock()
			f.held--
			f.mu.Unlock()
		})
	}, nil
}

func (f *fakeVolumes) holding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

// TestMounts: a run's volumes and datasets become the spec's mounts; every
// refusal has its class, names the field, and releases what was taken.
func TestMounts(t *testing.T) {
	ds := t.TempDir()
	vols := &fakeVolumes{dirs: map[string]string{"data": "/run/v/data", "other": "/run/v/other"}}
	r := &fakeRunner{}
	d, store := newTestDaemon(t, r, func(c *Config) {
		c.Volumes = vols
		c.Datasets = []Dataset{{Name: "ref", Path: ds}}
	})
	ctx := context.Background()
	_, err := d.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"},
		Volumes: []agentapi.VolumeMount{{Name: "data"}, {Name: "other", Path: "/mnt/o", ReadOnly: true}}, Datasets: []string{"ref"}}, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := r.last(t).Mounts
	want := []container.Mount{
		{Source: "/run/v/data", Target: "/mnt/data", OwnerUID: volume.OwnerID, OwnerGID: volume.OwnerID},
		{Source: "/run/v/other", Target: "/mnt/o", ReadOnly: true, OwnerUID: volume.OwnerID, OwnerGID: volume.OwnerID},
		{Source: ds, Target: "/mnt/ref", ReadOnly: true, NoExec: true, OwnerUID: 0, OwnerGID: 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts\n got %+v\nwant %+v", got, want)
	}

	many := make([]string, container.MaxMounts+1)
	for i := range many {
		many[i] = "ref"
	}
	for _, tc := range []struct {
		name     string
		vols     []agentapi.VolumeMount
		datasets []string
		class    error
		says     string
	}{
		{"unknown volume", []agentapi.VolumeMount{{Name: "data"}, {Name: "nope"}}, nil, errdefs.ErrNotFound, `"nope"`},
		{"unknown dataset", []agentapi.VolumeMount{{Name: "data"}}, []string{"nope"}, errdefs.ErrNotFound, "[ref]"},
		{"bad name", []agentapi.VolumeMount{{Name: "../x"}}, nil, errdefs.ErrInvalidArgument, "volumes[0].name"},
		{"path outside /mnt", []agentapi.VolumeMount{{Name: "data", Path: "/etc"}}, nil, errdefs.ErrInvalidArgument, "volumes[0].path"},
		{"nested path", []agentapi.VolumeMount{{Name: "data", Path: "/mnt/a/b"}}, nil, errdefs.ErrInvalidArgument, "volumes[0].path"},
		{"same target twice", []agentapi.VolumeMount{{Name: "data"}, {Name: "other", Path: "/mnt/data"}}, nil, errdefs.ErrInvalidArgument, "volumes[1].path"},
		{"a volume over a dataset", []agentapi.VolumeMount{{Name: "data", Path: "/mnt/ref"}}, []string{"ref"}, errdefs.ErrInvalidArgument, "datasets[0]"},
		{"too many", nil, many, errdefs.ErrInvalidArgument, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, Volumes: tc.vols, Datasets: tc.datasets}, RunOptions{})
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err %v, want %v saying %q", err, tc.class, tc.says)
			}
			if n := vols.holding(); n != 0 {
				t.Errorf("%d volumes still held after a refusal", n)
			}
			if n := store.holding(); n != 0 {
				t.Errorf("%d rootfs still held after a refusal", n)
			}
		})
	}
	if n := vols.holding(); n != 0 {
		t.Errorf("%d volumes held after the runs", n)
	}
}
