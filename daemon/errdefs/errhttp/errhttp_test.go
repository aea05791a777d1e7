package errhttp

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestEveryClass fails for a class with no status, and for two classes
// with one wire code (a client could not tell them apart).
func TestEveryClass(t *testing.T) {
	codes := map[string]error{}
	for _, c := range errdefs.Classes() {
		if _, ok := mapping[c]; !ok {
			t.Errorf("class %q has no HTTP status", c)
			continue
		}
		status, code := ToHTTP(fmt.Errorf("wrapped: %w", errdefs.New(c, "x")))
		if status < 400 || status == http.StatusInternalServerError || code == agentapi.CodeInternal {
			t.Errorf("class %q: %d %q, want a 4xx or a 5xx of its own", c, status, code)
		}
		if FromCode(code) != c {
			t.Errorf("FromCode(%q) = %v, want %q", code, FromCode(code), c)
		}
		if other, ok := codes[code]; ok {
			t.Errorf("classes %q and %q share the code %q", c, other, code)
		}
		codes[code] = c
	}
	if FromCode(agentapi.CodeInternal) != nil || FromCode(agentapi.CodeForbidden) != nil {
		t.Error("FromCode gave a class to a code of none")
	}
	if len(mapping) != len(errdefs.Classes()) {
		t.Errorf("%d classes mapped, %d classes", len(mapping), len(errdefs.Classes()))
	}
}

func TestToHTTP(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{errdefs.New(errdefs.ErrSessionBusy, "busy"), http.StatusConflict, agentapi.CodeSessionBusy},
		{errdefs.New(errdefs.ErrSessionDead, "dead"), http.StatusConflict, agentapi.CodeSessionDead},
		{errdefs.New(errdefs.ErrSessionParked, "parked"), http.StatusConflict, agentapi.CodeSessionParked},
		{errdefs.New(errdefs.ErrExists, "exists"), http.StatusConflict, agentapi.CodeExists},
		{errdefs.New(errdefs.ErrInUse, "in use"), http.StatusConflict, agentapi.CodeInUse},
		{errdefs.Field("limits.pids", "negative"), http.StatusBadRequest, agentapi.CodeInvalidArgument},
		{&http.MaxBytesError{Limit: 1}, http.StatusRequestEntityTooLarge, agentapi.CodePayloadTooLarge},
		{errors.New("no class"), http.StatusInternalServerError, agentapi.CodeInternal},
	} {
		if status, code := ToHTTP(tc.err); status != tc.status || code != tc.code {
			t.Errorf("ToHTTP(%v) = %d %q, want %d %q", tc.err, status, code, tc.status, tc.code)
		}
	}
}
