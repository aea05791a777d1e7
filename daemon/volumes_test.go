package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
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
	dirs   map[string]string
	owners map[string]int64
	mu     sync.Mutex
	held   int
}

func (f *fakeVolumes) Create(name string, size, owner int64) (volume.Info, error) {
	return volume.Info{}, errors.New("not in this test")
}
func (f *fakeVolumes) List(a volume.Access) []volume.Info {
	var out []volume.Info
	for name := range f.dirs {
		if owner := f.owner(name); a == nil || a(owner) {
			out = append(out, volume.Info{Name: name, Owner: owner})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fakeVolumes) owner(name string) int64 {
	if o, ok := f.owners[name]; ok {
		return o
	}
	return volume.NoOwner
}
func (f *fakeVolumes) Get(name string, a volume.Access) (volume.Info, error) {
	return volume.Info{}, errors.New("not in this test")
}
func (f *fakeVolumes) Delete(name string, a volume.Access) error {
	return errors.New("not in this test")
}
func (f *fakeVolumes) Files(name string, a volume.Access) (*workspace.Workspace, error) {
	return nil, errors.New("not in this test")
}

// fakeDiskOwner owns the fake volumes' files on disk.
const fakeDiskOwner = 4243

// Acquire finds the volumes in dirs; those in owners belong to that uid.
func (f *fakeVolumes) Acquire(name string, a volume.Access) (string, int, func(), error) {
	d, ok := f.dirs[name]
	if !ok || a != nil && !a(f.owner(name)) {
		return "", 0, nil, fmt.Errorf("volume %q: %w", name, volume.ErrNotFound)
	}
	f.mu.Lock()
	f.held++
	f.mu.Unlock()
	var once sync.Once
	return d, fakeDiskOwner, func() {
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
	vols := &fakeVolumes{dirs: map[string]string{"data": "/run/v/data", "other": "/run/v/other", "theirs": "/run/v/theirs"},
		owners: map[string]int64{"theirs": 4242}}
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
		{Source: "/run/v/data", Target: "/mnt/data", OwnerUID: fakeDiskOwner, OwnerGID: fakeDiskOwner},
		{Source: "/run/v/other", Target: "/mnt/o", ReadOnly: true, OwnerUID: fakeDiskOwner, OwnerGID: fakeDiskOwner},
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
	// Another uid's volume is not found for a caller, and what was taken
	// before it is given back; its owner and root may mount it.
	theirs := []agentapi.VolumeMount{{Name: "data"}, {Name: "theirs"}}
	as := func(uid uint32) context.Context { return WithCaller(ctx, Caller{UID: uid}) }
	if _, err := d.Run(as(1000), &agentapi.RunRequest{Argv: []string{"true"}, Volumes: theirs}, RunOptions{}); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `"theirs"`) {
		t.Errorf("uid 1000 mounts uid 4242's volume: %v, want not found", err)
	}
	if n := vols.holding(); n != 0 {
		t.Errorf("%d volumes still held after a refusal", n)
	}
	if info, err := d.Info(as(1000)); err != nil || !reflect.DeepEqual(info.Volumes, []string{"data", "other"}) {
		t.Errorf("uid 1000's /v1/info names volumes %v (%v), want its own and the ownerless ones", info.Volumes, err)
	}
	if info, err := d.Info(as(0)); err != nil || !reflect.DeepEqual(info.Volumes, []string{"data", "other", "theirs"}) {
		t.Errorf("root's /v1/info names volumes %v (%v), want them all", info.Volumes, err)
	}
	for _, uid := range []uint32{4242, 0} {
		if _, err := d.Run(as(uid), &agentapi.RunRequest{Argv: []string{"true"}, Volumes: theirs}, RunOptions{}); err != nil {
			t.Errorf("uid %d mounts uid 4242's volume: %v", uid, err)
		}
	}
	if n := vols.holding(); n != 0 {
		t.Errorf("%d volumes held after the runs", n)
	}
}
