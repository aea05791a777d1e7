package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/container/clock"
	"github.com/nsbox/nsbox/daemon/caller"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
)

func TestCheckMeta(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		err            bool
	}{
		{"none", "", "", false},
		{"compacted", `{ "e2b" : {"id": "x"} }`, `{"e2b":{"id":"x"}}`, false},
		{"not JSON", `{"e2b":`, "", true},
		{"two values", `{} {}`, "", true},
		{"too large", `"` + strings.Repeat("a", MaxMetaBytes) + `"`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkMeta(json.RawMessage(tc.in))
			if tc.err {
				var fe *errdefs.FieldError
				if !errors.As(err, &fe) || fe.Field != "meta" {
					t.Fatalf("%q: %v, want a field error naming meta", tc.in, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("%q: %q %v, want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// policyCore is a Core with a policy only: enough for the parked
// sessions' calls.
type policyCore struct{ Core }

func (policyCore) Policy() *policy.Rules { return &policy.Rules{} }

// TestParkedMeta: a parked session's Meta is set into its record.json
// (the other fields written as they were) and read back, by the store a
// restart opens too; another uid's parked session is not found.
func TestParkedMeta(t *testing.T) {
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
	open := func() *Keeper {
		t.Helper()
		st, err := openParkStore(dir, slog.New(slog.DiscardHandler), clock.Real)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.close)
		return &Keeper{core: policyCore{}, log: slog.New(slog.DiscardHandler), clock: clock.Real, parked: st}
	}
	k := open()
	owner := caller.With(context.Background(), caller.Caller{UID: 1000})
	if m, err := k.SessionMeta(owner, "s1"); err != nil || m != nil {
		t.Fatalf("a record without meta: %s %v, want none", m, err)
	}
	other := caller.With(context.Background(), caller.Caller{UID: 1001})
	// (This Keeper has no live sessions: not found says ErrNoSessions.)
	if err := k.SetSessionMeta(other, "s1", json.RawMessage(`{"a":1}`)); !errors.Is(err, ErrNoSessions) {
		t.Fatalf("another uid's set: %v, want its parked session not found", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "s1", parkRecordF)); string(b) != string(golden) {
		t.Fatalf("another uid's set changed record.json:\n%s", b)
	}
	if err := k.SetSessionMeta(owner, "s1", json.RawMessage(`{"e2b": {"id": "s1"}}`)); err != nil {
		t.Fatal(err)
	}
	if m, err := k.SessionMeta(owner, "s1"); err != nil || string(m) != `{"e2b":{"id":"s1"}}` {
		t.Fatalf("after set: %s %v", m, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "s1", parkRecordF))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(string(golden), "\n}") + ",\n  \"meta\": {\n    \"e2b\": {\n      \"id\": \"s1\"\n    }\n  }\n}"
	if string(b) != want {
		t.Fatalf("record.json after set:\n%s\nwant\n%s", b, want)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "s1")); len(ents) != 1 {
		t.Fatalf("the session's directory holds %d files, want record.json only (no temp file)", len(ents))
	}
	if m, err := open().SessionMeta(owner, "s1"); err != nil || string(m) != `{"e2b":{"id":"s1"}}` {
		t.Fatalf("after a restart: %s %v", m, err)
	}
}
