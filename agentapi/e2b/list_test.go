package e2b

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// listPages reads every page of GET /v2/sandboxes?query as the SDK's
// paginator does: the next request carries the last answer's X-Next-Token.
// It returns the ids page by page and each answer's X-Total-Running.
func listPages(t *testing.T, s *Server, key, query string) (pages [][]string, totals []string) {
	t.Helper()
	next := ""
	for len(pages) < 20 {
		q := query
		if next != "" {
			q += "&nextToken=" + url.QueryEscape(next)
		}
		w := do(t, s, "GET", "/v2/sandboxes?"+q, "", map[string]string{"X-API-KEY": key})
		if w.Code != http.StatusOK {
			t.Fatalf("list ?%s: %d %s", q, w.Code, w.Body)
		}
		var got []sandboxJSON
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sb := range got {
			ids = append(ids, sb.SandboxID)
		}
		pages = append(pages, ids)
		totals = append(totals, w.Header().Get("X-Total-Running"))
		if next = w.Header().Get("X-Next-Token"); next == "" {
			return pages, totals
		}
	}
	t.Fatalf("list ?%s: no last page after %d", query, len(pages))
	return nil, nil
}

func TestListPages(t *testing.T) {
	s, core := newTestServer(t)
	// Four of key A's, started at t0+3s, t0+2s, t0+2s, t0 (two at once:
	// the id orders them); the second paused. Key B's is never listed.
	t0 := time.Now().Add(-time.Minute)
	var ids []string
	for _, off := range []time.Duration{3, 2, 2, 0} {
		sb := create(t, s, keyA, `{"metadata":{"run":"pages"}}`)
		core.mu.Lock()
		core.sessions[sb.SandboxID].CreatedAt = t0.Add(off * time.Second)
		core.mu.Unlock()
		ids = append(ids, sb.SandboxID)
	}
	create(t, s, keyB, `{"metadata":{"run":"pages"}}`)
	if ids[2] < ids[1] {
		ids[1], ids[2] = ids[2], ids[1]
	}
	core.mu.Lock()
	core.sessions[ids[1]].State = agentapi.SessionParked
	core.mu.Unlock()
	running := []string{ids[0], ids[2], ids[3]}
	rev := func(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }
	meta := "metadata=" + url.QueryEscape("run=pages")

	for _, tc := range []struct {
		name, query string
		want        []string
		pageSize    int
		total       string
	}{
		{"newest first, one a page", meta + "&limit=1", ids, 1, "3"},
		{"desc, three a page", meta + "&order=desc&limit=3", ids, 3, "3"},
		{"oldest first, one a page", meta + "&order=asc&limit=1", rev(ids), 1, "3"},
		{"running, two a page", meta + "&state=running&limit=2", running, 2, "3"},
		{"paused only: no running total", meta + "&state=paused&limit=1", []string{ids[1]}, 1, ""},
		{"every one on the default page", meta, ids, 100, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pages, totals := listPages(t, s, keyA, tc.query)
			var all []string
			for i, p := range pages {
				if len(p) > tc.pageSize || (i < len(pages)-1 && len(p) != tc.pageSize) {
					t.Errorf("page %d holds %d, want %d: %v", i, len(p), tc.pageSize, pages)
				}
				if totals[i] != tc.total {
					t.Errorf("page %d: X-Total-Running %q, want %q", i, totals[i], tc.total)
				}
				all = append(all, p...)
			}
			if !slices.Equal(all, tc.want) {
				t.Errorf("got %v, want %v", pages, tc.want)
			}
		})
	}
}

func TestListRefuses(t *testing.T) {
	s, _ := newTestServer(t)
	create(t, s, keyA, `{}`)
	create(t, s, keyA, `{}`)
	w := do(t, s, "GET", "/v2/sandboxes?limit=1", "", map[string]string{"X-API-KEY": keyA})
	desc := w.Header().Get("X-Next-Token")
	if w.Code != http.StatusOK || desc == "" {
		t.Fatalf("limit=1 of two: %d, token %q", w.Code, desc)
	}
	for _, q := range []string{
		"limit=0", "limit=101", "limit=-1", "order=sideways", "state=stopped",
		"nextToken=not-a-token", "order=asc&nextToken=" + url.QueryEscape(desc),
	} {
		if w := do(t, s, "GET", "/v2/sandboxes?"+q, "", map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", q, w.Code, w.Body)
		}
	}
}
