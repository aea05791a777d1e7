package daemon

import (
	"context"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/workspace"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/volume"
	"github.com/nsbox/nsbox/daemon/wire"
)

// Volumes is the daemon's store of named volumes; *volume.Store
// implements it.
// A volume belongs to the uid that created it, as a session does: the
// other methods find only the volumes their Access allows.
type Volumes interface {
	Create(name string, size, owner int64) (volume.Info, error)
	List(volume.Access) []volume.Info
	Get(name string, a volume.Access) (volume.Info, error)
	Delete(name string, a volume.Access) error
	// Acquire marks a volume in use by one sandbox until release.
	// Its files are owner's on disk (volume.Store.OwnerID, or the owner
	// an older volume kept), uid 1000 inside.
	Acquire(name string, a volume.Access) (dir string, owner int, release func(), err error)
	// Files opens a volume's root for the file API.
	Files(name string, a volume.Access) (*workspace.Workspace, error)
}

// volumeAccess is what ctx's caller may see and use of the volumes: its
// own, ownerless ones, and all of them for an admin (mayUse).
func (d *Daemon) volumeAccess(ctx context.Context) volume.Access {
	return func(owner int64) bool { return d.mayUse(ctx, owner) }
}

// Dataset is a read-only host directory the operator declared
// ([[datasets]]), mounted by name.
type Dataset struct {
	Name string
	Path string
}

// ErrNoVolumes: the daemon was started without a volume store.
var ErrNoVolumes = errdefs.New(errdefs.ErrUnavailable, "named volumes are not available on this daemon")

// mounts resolves a request's volumes and datasets into the sandbox's
// mounts. The returned release calls then (what the caller holds until
// the sandbox is gone: its rootfs) and marks the volumes free again; on
// error, what mounts took is given back and the release is then alone.
// A caller names volumes and datasets, never a host path, and only
// volumes it may use (volumeAccess); datasets are every caller's.
func (d *Daemon) mounts(ctx context.Context, vols []agentapi.VolumeMount, datasets []string, then func()) (_ []container.Mount, _ func(), err error) {
	if len(vols) == 0 && len(datasets) == 0 {
		return nil, then, nil
	}
	var out []container.Mount
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	if n := len(vols) + len(datasets); n > container.MaxMounts {
		return nil, then, errdefs.Field("volumes", "%d volumes and datasets: at most %d per sandbox", n, container.MaxMounts)
	}
	targets := map[string]string{}
	target := func(field, p, what string) error {
		if _, err := container.MountName(p); err != nil {
			return errdefs.Field(field, "%v", err)
		}
		if other, ok := targets[p]; ok {
			return errdefs.Field(field, "%s: %s is %s's already", what, p, other)
		}
		targets[p] = what
		return nil
	}
	for i, v := range vols {
		field := fmt.Sprintf("volumes[%d]", i)
		if err := volume.ValidName(v.Name); err != nil {
			return nil, then, errdefs.Field(field+".name", "%v", err)
		}
		p := v.Path
		if p == "" {
			p = container.MountDir + "/" + v.Name
		}
		if err := target(field+".path", p, "volume "+v.Name); err != nil {
			return nil, then, err
		}
		if d.cfg.Volumes == nil {
			return nil, then, ErrNoVolumes
		}
		dir, owner, rel, err := d.cfg.Volumes.Acquire(v.Name, d.volumeAccess(ctx))
		if err != nil {
			return nil, then, classify(err)
		}
		releases = append(releases, rel)
		out = append(out, container.Mount{Source: dir, Target: p, ReadOnly: v.ReadOnly, OwnerUID: owner, OwnerGID: owner})
	}
	for i, name := range datasets {
		field := fmt.Sprintf("datasets[%d]", i)
		ds, ok := d.dataset(name)
		if !ok {
			return nil, then, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s: dataset %q is not declared; the declared datasets are [%s] (GET /v1/info; an operator adds one with [[datasets]] in the config)", field, name, strings.Join(d.datasetNames(), ", ")))
		}
		p := container.MountDir + "/" + name
		if err := target(field, p, "dataset "+name); err != nil {
			return nil, then, err
		}
		// The directory's owner on disk is the sandbox user's inside.
		st, err := os.Stat(ds.Path)
		if err != nil {
			return nil, then, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("dataset %s: %v", name, err))
		}
		sys := st.Sys().(*syscall.Stat_t)
		out = append(out, container.Mount{Source: ds.Path, Target: p, ReadOnly: true, NoExec: true, OwnerUID: int(sys.Uid), OwnerGID: int(sys.Gid)})
	}
	return out, func() { then(); release() }, nil
}

func (d *Daemon) dataset(name string) (Dataset, bool) {
	for _, ds := range d.cfg.Datasets {
		if ds.Name == name {
			return ds, true
		}
	}
	return Dataset{}, false
}

func (d *Daemon) datasetNames() []string {
	out := []string{}
	for _, ds := range d.cfg.Datasets {
		out = append(out, ds.Name)
	}
	sort.Strings(out)
	return out
}

// volumeNames names the volumes ctx's caller may use.
func (d *Daemon) volumeNames(ctx context.Context) []string {
	out := []string{}
	if d.cfg.Volumes != nil {
		for _, v := range d.cfg.Volumes.List(d.volumeAccess(ctx)) {
			out = append(out, v.Name)
		}
	}
	return out
}

func wireVolume(in volume.Info) agentapi.Volume {
	v := agentapi.Volume{Name: in.Name, SizeBytes: in.SizeBytes, UsedBytes: in.UsedBytes, InUse: in.InUse, ReadOnly: in.ReadOnly}
	if in.Owner >= 0 {
		uid := uint32(in.Owner)
		v.OwnerUID = &uid
	}
	return v
}

// CreateVolume makes a named volume, owned by the caller.
func (d *Daemon) CreateVolume(ctx context.Context, req *agentapi.VolumeRequest) (*agentapi.Volume, error) {
	if d.cfg.Volumes == nil {
		return nil, ErrNoVolumes
	}
	in, err := d.cfg.Volumes.Create(req.Name, req.SizeBytes, owner(ctx))
	if err != nil {
		return nil, classify(err)
	}
	d.log.Info("volume created", append(callerAttrs(ctx), "volume", in.Name, "size_bytes", in.SizeBytes)...)
	v := wireVolume(in)
	return &v, nil
}

// Volumes describes every named volume the caller may use.
func (d *Daemon) Volumes(ctx context.Context) []agentapi.Volume {
	out := []agentapi.Volume{}
	if d.cfg.Volumes != nil {
		for _, in := range d.cfg.Volumes.List(d.volumeAccess(ctx)) {
			out = append(out, wireVolume(in))
		}
	}
	return out
}

// Volume describes one named volume.
func (d *Daemon) Volume(ctx context.Context, name string) (*agentapi.Volume, error) {
	if d.cfg.Volumes == nil {
		return nil, ErrNoVolumes
	}
	in, err := d.cfg.Volumes.Get(name, d.volumeAccess(ctx))
	if err != nil {
		return nil, classify(err)
	}
	v := wireVolume(in)
	return &v, nil
}

// DeleteVolume removes a volume and its data; one a live sandbox mounts
// is refused (409).
func (d *Daemon) DeleteVolume(ctx context.Context, name string) error {
	if d.cfg.Volumes == nil {
		return ErrNoVolumes
	}
	if err := d.cfg.Volumes.Delete(name, d.volumeAccess(ctx)); err != nil {
		return classify(err)
	}
	d.log.Info("volume deleted", append(callerAttrs(ctx), "volume", name)...)
	return nil
}

// volumeFiles runs op on volume name's root, opened for the file API:
// paths resolve beneath it and no symlink is ever followed.
func (d *Daemon) volumeFiles(ctx context.Context, name, p string, op func(*workspace.Workspace) error) error {
	if d.cfg.Volumes == nil {
		return ErrNoVolumes
	}
	if p != "" {
		if err := container.ValidPath(p); err != nil {
			return errdefs.Field("path", "%v", err)
		}
	}
	ws, err := d.cfg.Volumes.Files(name, d.volumeAccess(ctx))
	if err != nil {
		return classify(err)
	}
	defer ws.Close()
	return classify(op(ws))
}

// maxListDepth is how deep a volume's listing goes.
const maxListDepth = 64

// ListVolumeFiles lists every entry of a volume (symlinks listed, never
// followed), at most 10,000.
func (d *Daemon) ListVolumeFiles(ctx context.Context, name string) (*agentapi.FileList, error) {
	out := &agentapi.FileList{Files: []agentapi.WorkspaceFile{}}
	err := d.volumeFiles(ctx, name, "", func(ws *workspace.Workspace) error {
		entries, truncated, err := ws.ListDir("", maxListDepth)
		if err != nil {
			return err
		}
		out.FilesTruncated = truncated
		for _, e := range entries {
			out.Files = append(out.Files, wire.Entry(e))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadVolumeFile reads a regular file of a volume, of at most max bytes.
func (d *Daemon) ReadVolumeFile(ctx context.Context, name, p string, max int64) ([]byte, error) {
	var data []byte
	err := d.volumeFiles(ctx, name, p, func(ws *workspace.Workspace) (err error) {
		data, err = ws.ReadFile(p, max)
		return err
	})
	return data, err
}

// WriteVolumeFile writes a file into a volume (mode 0644, parents made),
// owned by the volume's owner: the sandbox user's inside.
func (d *Daemon) WriteVolumeFile(ctx context.Context, name, p string, data []byte) error {
	return d.volumeFiles(ctx, name, p, func(ws *workspace.Workspace) error {
		return ws.WriteFile(p, data, 0o644)
	})
}

// RemoveVolumeFile removes a file (or an empty directory) of a volume.
func (d *Daemon) RemoveVolumeFile(ctx context.Context, name, p string) error {
	if p == "" || path.Clean(p) == "." {
		return errdefs.Field("path", "empty")
	}
	return d.volumeFiles(ctx, name, p, func(ws *workspace.Workspace) error {
		return ws.Remove(p)
	})
}
