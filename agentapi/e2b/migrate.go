package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// migrate moves the records an older endpoint kept of its paused
// sandboxes, one file <dir>/<id>.json each, into their parked sessions'
// Meta, so that an upgraded daemon keeps its paused E2B sandboxes. A
// record whose session is gone or not parked (it ended with the old
// daemon) is dropped; a file migrated or dropped is deleted, and so is
// dir once empty. A file that cannot be read, or whose session's Meta
// cannot be written, stays for the next start.
func (s *Server) migrate(ctx context.Context, dir string) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("e2b: reading an older daemon's paused sandbox records", "dir", dir, "err", err)
		return
	}
	ctx = daemon.WithCaller(ctx, daemon.Caller{UID: 0})
	for _, e := range ents {
		name := e.Name()
		file := filepath.Join(dir, name)
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(file)
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		if err := s.migrateOne(ctx, id, file); err != nil {
			s.log.Warn("e2b: an older daemon's paused sandbox record was not migrated; left for the next start", "file", file, "err", err)
			continue
		}
		if err := os.Remove(file); err != nil {
			s.log.Warn("e2b: removing a migrated paused sandbox record", "file", file, "err", err)
		}
	}
	if err := os.Remove(dir); err == nil {
		s.log.Info("e2b: an older daemon's paused sandbox records are migrated into their sessions", "dir", dir)
	}
}

// migrateOne sets the record in file as its parked session's Meta, unless
// the session already has one; nil also when the session is gone.
func (s *Server) migrateOne(ctx context.Context, id, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return err
	}
	if rec.ID != id {
		return fmt.Errorf("the record of %q", rec.ID)
	}
	sess, err := s.core.Session(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && sess.State != agentapi.SessionParked) {
		s.log.Info("e2b: an older daemon's paused sandbox's session is gone; dropping its record", "sandbox", id)
		return nil
	}
	if err != nil {
		return err
	}
	if m, err := s.core.SessionMeta(ctx, id); err != nil || len(m) > 0 {
		return err // nil with a Meta: the session's own record wins
	}
	m, err := rec.meta()
	if err == nil {
		err = s.core.SetSessionMeta(ctx, id, m)
	}
	if err == nil {
		s.log.Info("e2b: a paused sandbox's record migrated into its session", "sandbox", id)
	}
	return err
}
