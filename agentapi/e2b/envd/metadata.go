package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi/e2b/envd/filesystem"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// File metadata (envd 0.6.2): an upload's X-Metadata-KEY: VALUE headers
// become the user.e2b.KEY extended attributes of every file it writes, set
// by the process agent inside the sandbox (procs.Agent.SetMeta), and an
// entry's metadata is read back from them wherever the SDK sees an entry
// (getInfo, list, rename, upload, watch events). Every upload replaces a
// file's metadata, so that overwriting a file without any clears it.

// metaHeader is the prefix of an upload's metadata headers.
const metaHeader = "X-Metadata-"

// maxMetaKey is the longest key: an extended attribute's name is at most
// 255 bytes, the prefix included.
const maxMetaKey = 255 - len(procs.MetaPrefix)

// uploadMeta is an upload's metadata, checked as envd checks it before
// anything is written: keys lower-cased, non-empty, at most maxMetaKey
// bytes; keys and values printable ASCII; all of it (each key with the
// prefix, and its value) at most procs.MetaMax bytes, which bounds the
// count too (at most 409 keys). nil when there is none.
func uploadMeta(h http.Header) (map[string]string, error) {
	var meta map[string]string
	total := 0
	for name, values := range h {
		if len(values) == 0 || len(name) <= len(metaHeader) || !strings.EqualFold(name[:len(metaHeader)], metaHeader) {
			continue
		}
		k, v := strings.ToLower(name[len(metaHeader):]), values[0]
		field := metaHeader + k
		switch {
		case len(k) > maxMetaKey:
			return nil, errdefs.Field(field, "the key is %d bytes; at most %d", len(k), maxMetaKey)
		case !printable(k):
			return nil, errdefs.Field(field, "the key is not printable ASCII")
		case !printable(v):
			return nil, errdefs.Field(field, "the value is not printable ASCII (0x20-0x7e)")
		}
		if meta == nil {
			meta = map[string]string{}
		}
		meta[k] = v
		total += len(procs.MetaPrefix) + len(k) + len(v)
	}
	if total > procs.MetaMax {
		return nil, errdefs.Field(metaHeader+"*", "the metadata is %d bytes (each key with its %q prefix, and its value); at most %d", total, procs.MetaPrefix, procs.MetaMax)
	}
	return meta, nil
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// metaError is a failure to set the metadata of the file at abs, with its
// class (fileError's); a filesystem that keeps no user extended
// attributes is an invalid argument that says so, never metadata dropped.
func metaError(abs string, err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) {
		return errdefs.In(errdefs.ErrInvalidArgument, fmt.Errorf("file metadata for %s: the filesystem there keeps no user extended attributes; write it under %s, /tmp or /dev/shm, or without metadata: %w", abs, Home, err))
	}
	return fileError(err)
}

// setMeta replaces the metadata of the file at abs through the agent; it
// returns what the file holds then. With none to set and no agent (the
// sandbox is ending) there is nothing to do: only the agent reads
// metadata.
func (s *server) setMeta(ctx context.Context, abs string, meta map[string]string) (map[string]string, error) {
	a, err := s.agent(ctx)
	if err != nil {
		if len(meta) == 0 && errors.Is(err, errdefs.ErrUnavailable) {
			return nil, nil
		}
		return nil, err
	}
	got, err := a.SetMeta(ctx, abs, meta)
	if err != nil {
		return nil, metaError(abs, err)
	}
	return got, nil
}

// withMeta fills in the metadata of workspace entries (described by the
// core, which reads no extended attributes), asking the agent for all of
// them at once. Best effort, as envd's: an entry the agent cannot read
// has none.
func (fs *filesystemService) withMeta(ctx context.Context, entries ...*filesystem.EntryInfo) {
	if len(entries) == 0 {
		return
	}
	a, err := fs.s.agent(ctx)
	if err != nil {
		return
	}
	paths := make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.Path
	}
	metas, err := a.Meta(ctx, paths)
	if err != nil {
		return
	}
	for i, e := range entries {
		e.Metadata = metas[i]
	}
}
