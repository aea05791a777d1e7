package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// MaxMetaBytes bounds a session's Meta: what a transport keeps of the
// sessions it made (E2B: the sandbox's key, tokens and fields) is small,
// and it is held in memory and written into every park.
const MaxMetaBytes = 256 << 10

// meta is a live session's Meta, which SetSessionMeta replaces: the
// transport's record of the session, one JSON value the core never reads.
// A park writes it into record.json ("meta"), a revive gives it back, so
// the transport's record and the session are one store on disk.
type meta struct {
	mu sync.Mutex
	b  json.RawMessage
}

func (m *meta) get() json.RawMessage {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.b
}

func (m *meta) set(b json.RawMessage) {
	m.mu.Lock()
	m.b = b
	m.mu.Unlock()
}

// checkMeta refuses a Meta that is not one JSON value or is too large; it
// returns a compact copy, nil for an empty one.
func checkMeta(b json.RawMessage) (json.RawMessage, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > MaxMetaBytes {
		return nil, errdefs.Field("meta", "%d bytes: a session's meta is at most %d", len(b), MaxMetaBytes)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, errdefs.Field("meta", "not one JSON value: %v", err)
	}
	return out.Bytes(), nil
}

// SessionMeta is the Meta of a session, live or parked, that its transport
// set (Options.Meta, SetSessionMeta); nil when none was.
func (k *Keeper) SessionMeta(ctx context.Context, id string) (json.RawMessage, error) {
	if p := k.parkedFor(ctx, id); p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.gone {
			return p.rec.Meta, nil
		}
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return nil, err
	}
	o, _ := sess.Options().Origin.(*origin)
	if o == nil {
		return nil, nil
	}
	return o.meta.get(), nil
}

// SetSessionMeta replaces a session's Meta. A live session's is kept in
// memory until its park; a parked session's record.json is written again
// (synced, by rename). A Meta set while the session is being parked may
// be lost with its live session: a transport sets it again when it sees
// the session parked.
func (k *Keeper) SetSessionMeta(ctx context.Context, id string, b json.RawMessage) error {
	b, err := checkMeta(b)
	if err != nil {
		return err
	}
	if p := k.parkedFor(ctx, id); p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.gone {
			return k.parked.setMeta(p, b)
		}
	}
	sess, err := k.session(ctx, id)
	if err != nil {
		return err
	}
	o, _ := sess.Options().Origin.(*origin)
	if o == nil || o.meta == nil {
		return fmt.Errorf("session %s: %w", id, ErrNotCarriable)
	}
	o.meta.set(b)
	return nil
}

// setMeta sets p's Meta and writes its record.json again: a temp file in
// its directory, synced, renamed over it, the directory synced. The
// caller holds p.mu.
func (s *parkStore) setMeta(p *parked, m json.RawMessage) error {
	rec := p.rec
	rec.Meta = m
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.path(parkTmp + parkRecordF)
	_ = os.Remove(tmp)
	if _, err := writeSynced(tmp, func(w io.Writer) (int64, error) {
		n, err := w.Write(b)
		return int64(n), err
	}); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("session %s: record: %w", rec.Session.ID, err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, parkRecordF)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("session %s: record: %w", rec.Session.ID, mapDiskErr(err))
	}
	if err := syncDir(p.dir); err != nil {
		return fmt.Errorf("session %s: record: %w", rec.Session.ID, err)
	}
	p.rec.Meta = m // the one field that changed: list reads others unlocked
	return nil
}
