package sessions

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/runner"
)

// A parked session is a directory <state_dir>/sessions/<id>/ (0700, root)
// of three files (0600): the runner's state blob, a tar of the workspace
// and record.json. It is written as <state_dir>/sessions/.tmp-<id>/, each
// file fsynced, then renamed into place and the parent fsynced: a crash
// leaves either the whole park or a temp directory the next start removes.
const (
	parkVersion = 1
	parkState   = "state"
	parkArchive = "workspace.tar"
	parkRecordF = "record.json"
	parkTmp     = ".tmp-"
)

// parkRecord is record.json.
type parkRecord struct {
	Version int `json:"version"`
	// Session is the session's description when it was parked.
	Session agentapi.Session `json:"session"`
	Origin  origin           `json:"origin"`
	// Owner is the creator's uid (-1: none), enforced after a revive too.
	Owner    int64     `json:"owner"`
	ParkedAt time.Time `json:"parked_at"`
	// Expires is when the parked session is removed: its park plus
	// [sessions] park_retention.
	Expires time.Time `json:"expires_at"`
	// LifetimeLeftMs is what was left of the session's lifetime at its
	// park: a revive gets it. (0 in records from before: the lifetime
	// then ran while parked, up to Expires.)
	LifetimeLeftMs int64               `json:"lifetime_left_ms,omitempty"`
	StateBytes     int64               `json:"state_bytes"`
	ArchiveBytes   int64               `json:"archive_bytes"`
	NotCarried     []runner.NotCarried `json:"not_carried"`
	// Of is a snapshot's session (snapshots.go); empty in a park's.
	Of string `json:"snapshot_of,omitempty"`
	// Meta is the session's transport's record of it (Options.Meta,
	// SetSessionMeta), kept as it was given; absent when none was set.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// parked is one parked session (or a snapshot). mu is held by a revive
// or a delete, read-held by each start from a snapshot; gone is set once
// its files are removed.
type parked struct {
	dir string
	rec parkRecord
	mu  sync.RWMutex
	// gone: revived, deleted or expired (its files removed).
	gone bool
	// expiry removes it at rec.Expires.
	expiry clock.Timer
}

// lifetimeLeft is what a revive of p gets of its lifetime.
func (p *parked) lifetimeLeft() time.Duration {
	if p.rec.LifetimeLeftMs > 0 {
		return time.Duration(p.rec.LifetimeLeftMs) * time.Millisecond
	}
	return time.Until(p.rec.Expires)
}

func (p *parked) path(name string) string { return filepath.Join(p.dir, name) }

func (p *parked) bytes() int64 { return p.rec.StateBytes + p.rec.ArchiveBytes }

func (p *parked) wire() agentapi.Session {
	s := p.rec.Session
	s.State = agentapi.SessionParked
	s.PausedAt = nil
	at := p.rec.ParkedAt.UTC()
	s.ParkedAt = &at
	s.Network = nil
	s.ExpiresAt = p.rec.Expires.UTC()
	return s
}

// parkStore holds the parked sessions of a daemon.
type parkStore struct {
	dir   string
	log   *slog.Logger
	clock clock.Clock

	mu   sync.Mutex
	recs map[string]*parked
}

// openParkStore makes dir (0700) and loads the sessions parked in it; a
// temp directory of an interrupted park is removed, and so is a session
// whose lifetime ended.
func openParkStore(dir string, log *slog.Logger, clk clock.Clock) (*parkStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("parked sessions: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("parked sessions: %w", err)
	}
	s := &parkStore{dir: dir, log: log, clock: clk, recs: map[string]*parked{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("parked sessions: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), parkTmp) {
			log.Info("removing an interrupted park", "dir", p)
			_ = os.RemoveAll(p)
			continue
		}
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p, parkRecordF))
		var rec parkRecord
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err == nil && (rec.Version != parkVersion || rec.Session.ID != e.Name()) {
			err = fmt.Errorf("version %d, id %q", rec.Version, rec.Session.ID)
		}
		if err != nil {
			log.Warn("a parked session's record cannot be read; left as it is", "dir", p, "err", err)
			continue
		}
		if len(rec.Meta) > 0 { // indented in the file, as given after
			var m bytes.Buffer
			_ = json.Compact(&m, rec.Meta) // valid: it was unmarshalled
			rec.Meta = m.Bytes()
		}
		ps := &parked{dir: p, rec: rec}
		if s.clock.Now().After(rec.Expires) {
			log.Info("a parked session's retention ended while the daemon was down; removing it", "session", rec.Session.ID)
			_ = os.RemoveAll(p)
			continue
		}
		s.recs[rec.Session.ID] = ps
		s.expireAt(ps)
	}
	log.Info("parked sessions loaded", "count", len(s.recs))
	return s, nil
}

func (s *parkStore) get(id string) *parked {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs[id]
}

func (s *parkStore) list() []*parked {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*parked, 0, len(s.recs))
	for _, p := range s.recs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rec.ParkedAt.Before(out[j].rec.ParkedAt) })
	return out
}

// used is what the parked sessions hold on disk.
func (s *parkStore) used() int64 {
	var n int64
	for _, p := range s.recs {
		n += p.bytes()
	}
	return n
}

// usedNow is used, under s.mu; 0 for a nil store.
func (s *parkStore) usedNow() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used()
}

// expireAt removes p at its rec.Expires, unless it is gone by then: a
// parked session costs only disk, but not for ever.
func (s *parkStore) expireAt(p *parked) {
	p.expiry = s.clock.AfterFunc(p.rec.Expires.Sub(s.clock.Now()), func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.gone {
			s.log.Info("a parked session's retention ended; removing it", "session", p.rec.Session.ID, "parked_at", p.rec.ParkedAt)
			s.remove(p)
		}
	})
}

// close stops the expiry timers: the files stay for the next daemon.
func (s *parkStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.recs {
		if p.expiry != nil {
			p.expiry.Stop()
		}
	}
}

// remove deletes p's files and forgets it; the caller holds p.mu.
func (s *parkStore) remove(p *parked) {
	p.gone = true
	if p.expiry != nil {
		p.expiry.Stop()
	}
	s.mu.Lock()
	if s.recs[p.rec.Session.ID] == p {
		delete(s.recs, p.rec.Session.ID)
	}
	s.mu.Unlock()
	if err := os.RemoveAll(p.dir); err != nil {
		s.log.Warn("removing a parked session's files", "dir", p.dir, "err", err)
	}
}

// write parks rec's session: st and ws go to a temp directory, which
// becomes the session's once complete, if the store stays within
// maxBytes. On error nothing is left. The parked session is returned
// locked (p.mu): the caller unlocks it once the live session has ended.
func (s *parkStore) write(rec parkRecord, st *runner.State, ws *container.Workspace, maxBytes int64) (_ *parked, err error) {
	id := rec.Session.ID
	need := st.Size()
	if u, err := ws.Used(); err == nil {
		need += u
	}
	s.mu.Lock()
	used := s.used()
	s.mu.Unlock()
	if used+need > maxBytes {
		return nil, s.full(id, need, used, maxBytes)
	}
	if err := diskRoom(s.dir, need); err != nil {
		return nil, fmt.Errorf("park %s: %w", id, err)
	}
	tmp := filepath.Join(s.dir, parkTmp+id)
	_ = os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("park %s: %w", id, mapDiskErr(err))
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if rec.StateBytes, err = writeSynced(filepath.Join(tmp, parkState), st.WriteTo); err != nil {
		return nil, fmt.Errorf("park %s: state: %w", id, err)
	}
	left := maxBytes - used - rec.StateBytes
	if rec.ArchiveBytes, err = writeSynced(filepath.Join(tmp, parkArchive), func(w io.Writer) (int64, error) {
		tw := tar.NewWriter(&capWriter{w: w, left: left, over: func() error {
			return fmt.Errorf("park %s: its workspace archive passes the %d bytes left of the %d allowed: %w", id, max(left, 0), maxBytes, ErrParkFull)
		}})
		if err := ws.WriteTar(tw); err != nil {
			return 0, err
		}
		return 0, tw.Close()
	}); err != nil {
		return nil, fmt.Errorf("park %s: workspace: %w", id, err)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	if _, err = writeSynced(filepath.Join(tmp, parkRecordF), func(w io.Writer) (int64, error) {
		n, err := w.Write(b)
		return int64(n), err
	}); err != nil {
		return nil, fmt.Errorf("park %s: record: %w", id, err)
	}
	if err = syncDir(tmp); err != nil {
		return nil, fmt.Errorf("park %s: %w", id, err)
	}
	p := &parked{dir: filepath.Join(s.dir, id), rec: rec}
	s.mu.Lock()
	defer s.mu.Unlock()
	if used := s.used(); used+p.bytes() > maxBytes {
		return nil, s.full(id, p.bytes(), used, maxBytes)
	}
	if _, dup := s.recs[id]; dup {
		return nil, fmt.Errorf("park %s: it is parked already", id)
	}
	if err = os.Rename(tmp, p.dir); err != nil {
		return nil, fmt.Errorf("park %s: %w", id, mapDiskErr(err))
	}
	if err = syncDir(s.dir); err != nil {
		_ = os.RemoveAll(p.dir)
		return nil, fmt.Errorf("park %s: %w", id, err)
	}
	// Listed from now on, but locked until the caller has ended the
	// session's sandbox: a revive (or delete) waits for that, or it would
	// race the old sandbox for the id's liveness lock.
	p.mu.Lock()
	s.recs[id] = p
	s.expireAt(p)
	return p, nil
}

func (s *parkStore) full(id string, need, used, maxBytes int64) error {
	return fmt.Errorf("park %s: it needs %d bytes, parked sessions hold %d of the %d allowed: %w", id, need, used, maxBytes, ErrParkFull)
}

// capWriter fails once more than left bytes are written.
type capWriter struct {
	w    io.Writer
	left int64
	over func() error
}

func (c *capWriter) Write(b []byte) (int, error) {
	if c.left -= int64(len(b)); c.left < 0 {
		return 0, c.over()
	}
	return c.w.Write(b)
}

// writeSynced creates name (0600), fills it with fill, fsyncs and closes
// it, and returns its size.
func writeSynced(name string, fill func(io.Writer) (int64, error)) (int64, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, mapDiskErr(err)
	}
	defer f.Close()
	if _, err := fill(f); err != nil {
		return 0, mapDiskErr(err)
	}
	if err := f.Sync(); err != nil {
		return 0, mapDiskErr(err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// diskReserve is what a park leaves free on the state directory's disk:
// a twentieth of the filesystem, at most 1 GiB, for the host's own use.
func diskReserve(st *unix.Statfs_t) int64 {
	return min(int64(st.Blocks)*st.Bsize/20, 1<<30)
}

// diskRoom refuses a park of need bytes that would eat into the state
// directory's disk reserve: park_max_bytes caps what parked sessions
// hold, this keeps a host whose disk is smaller than it usable.
func diskRoom(dir string, need int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	free, reserve := int64(st.Bavail)*st.Bsize, diskReserve(&st)
	if need > free-reserve {
		return fmt.Errorf("%w: it needs %d bytes and the disk of %s has %d free, %d of them kept for the host", ErrParkFull, need, dir, free, reserve)
	}
	return nil
}

// mapDiskErr makes a full disk the park's ErrParkFull class (507).
func mapDiskErr(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("%w: the state directory's disk is full (%v)", ErrParkFull, err)
	}
	return err
}
