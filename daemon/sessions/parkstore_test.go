package sessions

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/container/clock/clocktest"
)

// TestOpenParkStore: at start the store loads complete parks, removes the
// temp directory of a park a crash interrupted and a park whose lifetime
// ended, and leaves a record it cannot read where it is, unlisted.
func TestOpenParkStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	write := func(id string, rec *parkRecord) {
		t.Helper()
		d := filepath.Join(dir, id)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		b := []byte("{not json")
		if rec != nil {
			b, _ = json.Marshal(rec)
		}
		if err := os.WriteFile(filepath.Join(d, parkRecordF), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rec := func(id string, expires time.Time) *parkRecord {
		return &parkRecord{Version: parkVersion, Session: agentapi.Session{ID: id}, Owner: 1000, ParkedAt: time.Now(), Expires: expires, StateBytes: 10, ArchiveBytes: 5}
	}
	write("live", rec("live", time.Now().Add(time.Hour)))
	write("expired", rec("expired", time.Now().Add(-time.Second)))
	write(parkTmp+"half", rec("half", time.Now().Add(time.Hour)))
	write("broken", nil)
	write("renamed", rec("other", time.Now().Add(time.Hour)))

	s, err := openParkStore(dir, slog.New(slog.DiscardHandler), clock.Real)
	if err != nil {
		t.Fatal(err)
	}
	if l := s.list(); len(l) != 1 || l[0].rec.Session.ID != "live" || l[0].rec.Owner != 1000 || s.used() != 15 {
		t.Fatalf("loaded %+v (used %d), want only live", l, s.used())
	}
	for name, want := range map[string]bool{"live": true, "expired": false, parkTmp + "half": false, "broken": true, "renamed": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("store directory: %v %v, want 0700", st.Mode(), err)
	}
	if p := s.get("live"); p.wire().State != agentapi.SessionParked || p.wire().ParkedAt == nil {
		t.Errorf("wire: %+v", p.wire())
	}
}

// TestParkRetentionEnds: a parked session is removed, files and all, when
// its retention ends, and not before.
func TestParkRetentionEnds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	clk := clocktest.New(time.Now())
	rec := parkRecord{Version: parkVersion, Session: agentapi.Session{ID: "kept"}, ParkedAt: clk.Now(), Expires: clk.Now().Add(4 * time.Second)}
	b, _ := json.Marshal(rec)
	if err := os.MkdirAll(filepath.Join(dir, "kept"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kept", parkRecordF), b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openParkStore(dir, slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	clk.Advance(4*time.Second - time.Millisecond)
	if s.get("kept") == nil {
		t.Fatal("removed 1 ms before its retention ends")
	}
	clk.Advance(time.Millisecond) // the expiry timer removes it before Advance returns
	if s.get("kept") != nil {
		t.Fatal("still listed at the end of its retention")
	}
	if _, err := os.Stat(filepath.Join(dir, "kept")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its files at the end of its retention: %v, want them removed", err)
	}
}

// TestDiskRoom checks that a park is refused before it would eat into the
// state disk's reserve, whatever park_max_bytes allows.
func TestDiskRoom(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a small tmpfs as the state disk")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if err := diskRoom(dir, 1<<20); err != nil {
		t.Errorf("1 MiB on an empty 64 MiB disk: %v", err)
	}
	if err := diskRoom(dir, 62<<20); !errors.Is(err, ErrParkFull) || !strings.Contains(err.Error(), "kept for the host") {
		t.Errorf("62 MiB on a 64 MiB disk (3.2 MiB reserved): %v, want ErrParkFull", err)
	}
}

// TestParkRecordFormat: a record.json as the daemon wrote it before the
// sessions left package daemon (testdata/record.json, written by that
// code) loads with every field, and is written again byte for byte: the
// on-disk format did not move with the code.
func TestParkRecordFormat(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sessions")
	if err := os.MkdirAll(filepath.Join(dir, "s1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s1", parkRecordF), golden, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openParkStore(dir, slog.New(slog.DiscardHandler), clock.Real)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	p := s.get("s1")
	if p == nil {
		t.Fatal("the record did not load")
	}
	r := p.rec
	if r.Owner != 1000 || r.Origin.Request.Language != "python" || !r.Origin.Processes || r.Origin.Request.LifetimeMs != 3600000 ||
		r.LifetimeLeftMs != 1800000 || p.bytes() != 15 || len(r.NotCarried) != 1 || r.NotCarried[0].Name != "sock" ||
		r.Session.IdleAction != "park" || r.Session.OwnerUID == nil || *r.Session.OwnerUID != 1000 {
		t.Errorf("loaded %+v", r)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(golden) {
		t.Errorf("written again as\n%s\nwant\n%s", b, golden)
	}
}
