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
	// parking is open while a park writes b to disk: a set waits for
	// it, then sets the parked record (or, the park failed, this one
	// again), so that no set is lost between the park's read and the
	// live session's end.
	parking chan struct{}
}

func (m *meta) get() json.RawMessage {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.b
}

// set sets b, or returns the channel of the park under way to wait for.
func (m *meta) set(b json.RawMessage) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parking != nil {
		return m.parking
	}
	m.b = b
	return nil
}

// seal returns b for a park and holds sets until unseal; the caller has
// the session to itself (Session.Capture), so parks do not overlap.
func (m *meta) seal() json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parking = make(chan struct{})
	return m.b
}

func (m *meta) unseal() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parking != nil {
		close(m.parking)
		m.parking = nil
	}
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
// (synced, by rename). A set during a park waits for it, and then sets
// the parked record.
func (k *Keeper) SetSessionMeta(ctx context.Context, id string, b json.RawMessage) error {
	b, err := checkMeta(b)
	if err != nil {
		return err
	}
	for {
		if p := k.parkedFor(ctx, id); p != nil {
			if done, err := k.setParkedMeta(p, b); done {
				return err
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
		wait := o.meta.set(b)
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setParkedMeta sets p's Meta unless p is gone (revived meanwhile: done
// is false).
func (k *Keeper) setParkedMeta(p *parked, b json.RawMessage) (done bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return false, nil
	}
	return true, k.parked.setMeta(p, b)
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
