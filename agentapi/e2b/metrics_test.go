package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nsbox/nsbox/daemon"
)

func (f *fakeCore) SessionStats(context.Context, string) (*daemon.SessionStats, error) {
	return &daemon.SessionStats{MemoryBytes: 1 << 20}, nil
}

// TestMetricsRange: getMetrics({start, end}) answers the present sample
// for a range that reaches now and nothing for one in the past or future.
func TestMetricsRange(t *testing.T) {
	s, _ := newTestServer(t)
	id := create(t, s, keyA, `{}`).SandboxID
	now := time.Now().Unix()
	for _, tc := range []struct {
		name, query string
		code, n     int
	}{
		{"no range", "", http.StatusOK, 1},
		{"the last minute", fmt.Sprintf("?start=%d&end=%d", now-60, now), http.StatusOK, 1},
		{"from a second ago, no end", fmt.Sprintf("?start=%d", now-1), http.StatusOK, 1},
		{"an hour ago", fmt.Sprintf("?start=%d&end=%d", now-3600, now-1800), http.StatusOK, 0},
		{"the next hour", fmt.Sprintf("?start=%d&end=%d", now+60, now+3600), http.StatusOK, 0},
		{"start after end", fmt.Sprintf("?start=%d&end=%d", now, now-60), http.StatusBadRequest, 0},
		{"start not a number", "?start=soon", http.StatusBadRequest, 0},
		{"negative end", "?end=-5", http.StatusBadRequest, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, s, "GET", "/sandboxes/"+id+"/metrics"+tc.query, "", map[string]string{"X-API-KEY": keyA})
			if w.Code != tc.code {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.code)
			}
			if tc.code != http.StatusOK {
				return
			}
			var got []metric
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got) != tc.n {
				t.Fatalf("%s: %d samples (%v), want %d", w.Body, len(got), err, tc.n)
			}
		})
	}
}
