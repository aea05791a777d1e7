package snapshots

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/sessions"
)

// fakeCore keeps snapshots in memory, in the order taken.
type fakeCore struct{ snaps []sessions.Snapshot }

func (c *fakeCore) SnapshotSession(_ context.Context, id string, so sessions.SnapshotOptions) (*sessions.Snapshot, error) {
	s := sessions.Snapshot{ID: so.ID, Of: id, CreatedAt: time.Now(), Bytes: 10, Meta: so.Meta}
	c.snaps = append(c.snaps, s)
	return &s, nil
}

func (c *fakeCore) Snapshots(context.Context) []sessions.Snapshot { return slices.Clone(c.snaps) }

func (c *fakeCore) DeleteSnapshot(_ context.Context, id string) error {
	c.snaps = slices.DeleteFunc(c.snaps, func(s sessions.Snapshot) bool { return s.ID == id })
	return nil
}

func (c *fakeCore) StartFromSnapshot(context.Context, string, sessions.FromSnapshotOptions) (*agentapi.CarriedSession, error) {
	return nil, errors.New("not in this test")
}

// serve is a Handler over core whose keys are the X-API-KEY header and
// whose sandboxes are "sb-KEY-*" of each key.
func serve(core Core) http.Handler {
	h := &Handler{Core: core, Log: slog.New(slog.DiscardHandler),
		Key: func(r *http.Request) string { return r.Header.Get("X-API-KEY") },
		Sandbox: func(r *http.Request, id string) (string, error) {
			if !strings.HasPrefix(id, "sb-"+r.Header.Get("X-API-KEY")+"-") {
				return "", errdefs.In(errdefs.ErrNotFound, errors.New("sandbox not found"))
			}
			return "base", nil
		},
		Decode: func(w http.ResponseWriter, r *http.Request, v any) (func(), error) {
			return func() {}, json.NewDecoder(r.Body).Decode(v)
		},
		WriteErr: func(w http.ResponseWriter, err error) {
			st, _ := httpkit.ToHTTP(err)
			http.Error(w, err.Error(), st)
		},
	}
	m := http.NewServeMux()
	h.Register(m)
	return m
}

func do(t *testing.T, h http.Handler, key, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("X-API-KEY", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func ids(t *testing.T, w *httptest.ResponseRecorder) []string {
	t.Helper()
	var list []Info
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &list) != nil {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	out := []string{}
	for _, i := range list {
		out = append(out, i.SnapshotID)
	}
	return out
}

// TestSnapshotRoutes: each key sees, filters, pages and deletes only its
// own snapshots; another key's are 404s, as unknown ones; names are
// checked.
func TestSnapshotRoutes(t *testing.T) {
	h := serve(&fakeCore{})
	take := func(key, sb, body string) Info {
		t.Helper()
		w := do(t, h, key, "POST", "/sandboxes/"+sb+"/snapshots", body)
		var i Info
		if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &i) != nil {
			t.Fatalf("take %s: %d %s", sb, w.Code, w.Body)
		}
		return i
	}
	a1 := take("a", "sb-a-1", `{"name": "web/app"}`)
	a2 := take("a", "sb-a-2", `{}`)
	b1 := take("b", "sb-b-1", `{"name": "web/app"}`)
	if !slices.Equal(a1.Names, []string{"web/app"}) || a2.Names == nil || len(a2.Names) != 0 {
		t.Errorf("names: %v and %v", a1.Names, a2.Names)
	}
	for _, c := range []struct {
		key, query string
		want       []string
	}{
		{"a", "", []string{a1.SnapshotID, a2.SnapshotID}},
		{"b", "", []string{b1.SnapshotID}},
		{"c", "", []string{}},
		{"a", "?sandboxID=sb-a-2", []string{a2.SnapshotID}},
		{"a", "?sandboxID=sb-b-1", []string{}},
		{"a", "?name=web/app", []string{a1.SnapshotID}},
		{"a", "?name=web/app:v1", []string{a1.SnapshotID}},
		{"a", "?name=" + a2.SnapshotID, []string{a2.SnapshotID}},
		{"a", "?name=" + b1.SnapshotID, []string{}},
		{"a", "?name=web", []string{}},
	} {
		if got := ids(t, do(t, h, c.key, "GET", "/snapshots"+c.query, "")); !slices.Equal(got, c.want) {
			t.Errorf("key %s, GET /snapshots%s: %v, want %v", c.key, c.query, got, c.want)
		}
	}

	w := do(t, h, "a", "GET", "/snapshots?limit=1", "")
	if got := ids(t, w); !slices.Equal(got, []string{a1.SnapshotID}) || w.Header().Get("X-Next-Token") != a1.SnapshotID {
		t.Errorf("page 1: %v, next %q", got, w.Header().Get("X-Next-Token"))
	}
	w = do(t, h, "a", "GET", "/snapshots?limit=1&nextToken="+a1.SnapshotID, "")
	if got := ids(t, w); !slices.Equal(got, []string{a2.SnapshotID}) || w.Header().Get("X-Next-Token") != "" {
		t.Errorf("page 2: %v, next %q", got, w.Header().Get("X-Next-Token"))
	}

	for _, c := range []struct {
		name, key, method, path, body string
		want                          int
	}{
		{"another key's sandbox", "b", "POST", "/sandboxes/sb-a-1/snapshots", `{}`, http.StatusNotFound},
		{"a name with a tag", "a", "POST", "/sandboxes/sb-a-1/snapshots", `{"name": "app:v1"}`, http.StatusBadRequest},
		{"an empty name", "a", "POST", "/sandboxes/sb-a-1/snapshots", `{"name": ""}`, http.StatusBadRequest},
		{"a long name", "a", "POST", "/sandboxes/sb-a-1/snapshots", `{"name": "` + strings.Repeat("n", MaxNameBytes+1) + `"}`, http.StatusBadRequest},
		{"limit 0", "a", "GET", "/snapshots?limit=0", "", http.StatusBadRequest},
		{"another key's delete", "b", "DELETE", "/templates/" + a1.SnapshotID, "", http.StatusNotFound},
		{"an unknown delete", "a", "DELETE", "/templates/nope", "", http.StatusNotFound},
		{"a delete", "a", "DELETE", "/templates/" + a1.SnapshotID, "", http.StatusNoContent},
		{"a delete again", "a", "DELETE", "/templates/" + a1.SnapshotID, "", http.StatusNotFound},
	} {
		if w := do(t, h, c.key, c.method, c.path, c.body); w.Code != c.want {
			t.Errorf("%s: %s %s: %d %s, want %d", c.name, c.method, c.path, w.Code, w.Body, c.want)
		}
	}
	if got := ids(t, do(t, h, "b", "GET", "/snapshots", "")); !slices.Equal(got, []string{b1.SnapshotID}) {
		t.Errorf("b's after a's deletes: %v", got)
	}
}
