package envd

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nsbox/nsbox/agentapi/httpkit"
	v1api "github.com/nsbox/nsbox/agentapi/server"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestStatusAgreesWithV1 checks that every error class, a slow body, and
// an error of none, answer the same status on envd's /files as on /v1.
func TestStatusAgreesWithV1(t *testing.T) {
	errs := []error{errors.New("no class"), &http.MaxBytesError{Limit: 1}, fmt.Errorf("upload: %w", httpkit.ErrBodyTimeout)}
	for _, c := range errdefs.Classes() {
		errs = append(errs, fmt.Errorf("wrapped: %w", errdefs.New(c, "x")))
	}
	for _, err := range errs {
		v1, _ := v1api.ToHTTP(err)
		w := httptest.NewRecorder()
		writeError(w, err)
		if w.Code != v1 {
			t.Errorf("%v: envd's /files wrote %d, /v1 %d", err, w.Code, v1)
		}
	}
}
