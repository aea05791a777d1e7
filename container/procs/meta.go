package procs

import (
	"context"
	"fmt"
)

// File metadata is kept as envd keeps it: a user.e2b.KEY extended
// attribute of the file for each key, set and read by the agent inside the
// sandbox as its user (a symlink's are its target's). The agent reads at
// most MetaMax bytes of a file's (each name with its prefix, and its
// value), leaving out what is not UTF-8; entries carry theirs (FileEntry.Meta).

// MetaPrefix is the extended attributes' prefix; MetaMax bounds a file's
// metadata (envd's: its names with the prefix and its values).
const (
	MetaPrefix = "user.e2b."
	MetaMax    = 4096
)

// metaPaths is the agent's bound on the paths of one fmeta.
const metaPaths = 128

// SetMeta replaces the metadata of the regular file at path with meta
// (nil: clears it) and returns what the file holds then. On a filesystem
// that keeps no user extended attributes it fails with EOPNOTSUPP, unless
// meta is empty.
func (a *Agent) SetMeta(ctx context.Context, path string, meta map[string]string) (map[string]string, error) {
	rep, err := a.fileCall(ctx, request{Op: "fsetmeta", Path: path, Meta: meta})
	if err != nil {
		return nil, err
	}
	return rep.Meta, nil
}

// SetMeta replaces the open file's metadata, as Agent.SetMeta does.
func (f *File) SetMeta(meta map[string]string) (map[string]string, error) {
	rep, err := f.a.fileCall(f.ctx, request{Op: "fsetmeta", Fh: f.fh, Path: f.path, Meta: meta})
	if err != nil {
		return nil, err
	}
	return rep.Meta, nil
}

// Meta reads the metadata of each of paths, in order: nil for a path that
// has none or cannot be read (gone, no extended attributes there).
func (a *Agent) Meta(ctx context.Context, paths []string) ([]map[string]string, error) {
	out := make([]map[string]string, 0, len(paths))
	for len(paths) > 0 {
		n := min(len(paths), metaPaths)
		rep, err := a.fileCall(ctx, request{Op: "fmeta", Paths: paths[:n]})
		if err != nil {
			return nil, err
		}
		if len(rep.Metas) != n {
			return nil, fmt.Errorf("%w: fmeta: %d answers for %d paths", ErrProtocol, len(rep.Metas), n)
		}
		out = append(out, rep.Metas...)
		paths = paths[n:]
	}
	return out, nil
}
