package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// store keeps what the endpoint knows of its paused sandboxes on disk, so
// that a parked session, which outlives a daemon restart, is still its
// key's E2B sandbox, with the same tokens, after one. A record is written
// when a sandbox is paused and removed when it resumes or goes; the key is
// kept as its SHA-256, never the key itself. With no directory (dir ""),
// records are not kept: after a restart a paused sandbox is reachable
// through /v1 only, by root.
type store struct {
	dir string
	log *slog.Logger
}

// record is <dir>/<id>.json.
type record struct {
	ID       string                 `json:"id"`
	Key      string                 `json:"key_sha256"`
	Token    string                 `json:"envd_access_token"`
	Traffic  string                 `json:"traffic_access_token"`
	Template string                 `json:"template"`
	Alias    string                 `json:"alias,omitempty"`
	Metadata map[string]string      `json:"metadata,omitempty"`
	Envs     map[string]string      `json:"envs,omitempty"`
	Started  time.Time              `json:"started_at"`
	CPUs     float64                `json:"cpus"`
	MemoryMB int64                  `json:"memory_mb"`
	DiskMB   int64                  `json:"disk_mb"`
	Contexts map[string]codeContext `json:"contexts"`
	// AutoPause: its timeout pauses it (lifecycle.onTimeout "pause").
	AutoPause bool `json:"auto_pause,omitempty"`
}

// openStore makes dir (0700, owned by the daemon's user: root).
func openStore(dir string, log *slog.Logger) (*store, error) {
	if dir == "" {
		return &store{log: log}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2b state: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2b state: %w", err)
	}
	return &store{dir: dir, log: log}, nil
}

func (st *store) path(id string) string { return filepath.Join(st.dir, id+".json") }

// save writes sb's record (0600), synced, by rename.
func (st *store) save(sb *sandbox, keys *Keys) error {
	if st.dir == "" {
		return nil
	}
	sb.mu.Lock()
	rec := record{ID: sb.id, Key: keys.fingerprint(sb.key), Token: sb.token, Traffic: sb.traffic, Template: sb.template,
		Alias: sb.alias, Metadata: sb.metadata, Envs: sb.envs, Started: sb.started, CPUs: sb.cpus, MemoryMB: sb.memoryMB,
		DiskMB: sb.diskMB, Contexts: sb.contexts, AutoPause: sb.autoPause}
	b, err := json.Marshal(rec)
	sb.mu.Unlock()
	if err != nil {
		return err
	}
	tmp := st.path(".tmp-" + sb.id)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, st.path(sb.id))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func (st *store) remove(id string) {
	if st.dir == "" {
		return
	}
	if err := os.Remove(st.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		st.log.Warn("e2b: removing a paused sandbox's record", "sandbox", id, "err", err)
	}
}

// load returns the sandboxes of the records whose session is parked and
// whose key is still one of keys. A record whose session is gone (its
// lifetime ended, or it was revived or deleted through /v1) is removed; a
// record of a key no longer in the keys file is left as it is and not
// loaded (no key could reach it), so that putting the key back makes it
// reachable again.
func (st *store) load(ctx context.Context, core Core, keys *Keys) []*sandbox {
	if st.dir == "" {
		return nil
	}
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		st.log.Warn("e2b: reading the paused sandboxes' records", "dir", st.dir, "err", err)
		return nil
	}
	ctx = daemon.WithCaller(ctx, daemon.Caller{UID: 0})
	var out []*sandbox
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(st.dir, name))
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		var rec record
		b, err := os.ReadFile(st.path(id))
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err == nil && rec.ID != id {
			err = fmt.Errorf("record of %q", rec.ID)
		}
		if err != nil {
			st.log.Warn("e2b: a paused sandbox's record cannot be read; left as it is", "file", st.path(id), "err", err)
			continue
		}
		sess, err := core.Session(ctx, id)
		if errors.Is(err, errdefs.ErrNotFound) || (err == nil && sess.State != agentapi.SessionParked) {
			st.log.Info("e2b: a paused sandbox's session is gone; removing its record", "sandbox", id)
			st.remove(id)
			continue
		}
		if err != nil {
			st.log.Warn("e2b: a paused sandbox's session", "sandbox", id, "err", err)
			continue
		}
		key := keys.byFingerprint(rec.Key)
		if key < 0 {
			st.log.Warn("e2b: a paused sandbox's API key is no longer in the keys file; it is unreachable until the key is back", "sandbox", id)
			continue
		}
		if rec.Contexts == nil {
			rec.Contexts = map[string]codeContext{}
		}
		out = append(out, &sandbox{id: id, key: key, token: rec.Token, traffic: rec.Traffic, template: rec.Template,
			alias: rec.Alias, metadata: rec.Metadata, envs: rec.Envs, started: rec.Started, cpus: rec.CPUs,
			memoryMB: rec.MemoryMB, diskMB: rec.DiskMB, contexts: rec.Contexts, autoPause: rec.AutoPause})
	}
	return out
}
