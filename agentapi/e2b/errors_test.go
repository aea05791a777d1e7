package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/agentapi/server"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestStatusAgreesWithV1 checks that every error class, the HTTP kit's
// own errors (a slow body: 408), and an error of none, answer the same
// status on E2B's control plane as on /v1 (envd's /files:
// envd.TestStatusAgreesWithV1).
func TestStatusAgreesWithV1(t *testing.T) {
	errs := []error{errors.New("no class"), &http.MaxBytesError{Limit: 1},
		fmt.Errorf("body: %w", httpkit.ErrBodyTimeout), fmt.Errorf("body: %w", httpkit.ErrMediaType)}
	for _, c := range errdefs.Classes() {
		errs = append(errs, fmt.Errorf("wrapped: %w", errdefs.New(c, "x")))
	}
	for _, err := range errs {
		v1, _ := server.ToHTTP(err)
		if got := statusOf(err); got != v1 {
			t.Errorf("%v: E2B %d, /v1 %d", err, got, v1)
		}
		w := httptest.NewRecorder()
		writeErr(w, err)
		if w.Code != v1 {
			t.Errorf("%v: E2B's control plane wrote %d, /v1 %d", err, w.Code, v1)
		}
	}
}

// dyingCore's sessions die between the pause's look and its park.
type dyingCore struct{ *fakeCore }

func (dyingCore) ParkSession(_ context.Context, id string) (*agentapi.Session, error) {
	return nil, errdefs.New(errdefs.ErrSessionDead, "session "+id+" is dead")
}

// TestPauseOfADyingSandbox: a sandbox that died under a pause is gone
// (404), not "already paused" (409, which the SDK answers with false) nor
// busy (503).
func TestPauseOfADyingSandbox(t *testing.T) {
	keys, err := NewKeys([]string{keyA})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Core: dyingCore{newFakeCore()}, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	id := create(t, s, keyA, `{}`).SandboxID
	if w := do(t, s, "POST", "/sandboxes/"+id+"/pause", "", map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNotFound {
		t.Fatalf("pause of a sandbox that died: %d %s, want 404", w.Code, w.Body)
	}
}
