package errconnect

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/nsbox/nsbox/daemon/errdefs"
)

// TestEveryClass fails for a class with no Connect code of its own.
func TestEveryClass(t *testing.T) {
	for _, c := range errdefs.Classes() {
		code, ok := mapping[c]
		if !ok {
			t.Errorf("class %q has no Connect code", c)
			continue
		}
		if code == connect.CodeInternal || code == connect.CodeUnknown {
			t.Errorf("class %q maps to %v", c, code)
		}
		if got := Code(fmt.Errorf("wrapped: %w", errdefs.New(c, "x"))); got != code {
			t.Errorf("Code of a wrapped %q = %v, want %v", c, got, code)
		}
	}
	if len(mapping) != len(errdefs.Classes()) {
		t.Errorf("%d classes mapped, %d classes", len(mapping), len(errdefs.Classes()))
	}
}

func TestToConnect(t *testing.T) {
	if ToConnect(nil) != nil {
		t.Error("ToConnect(nil) != nil")
	}
	ce := connect.NewError(connect.CodeAlreadyExists, errors.New("there"))
	if got := ToConnect(fmt.Errorf("w: %w", ce)); connect.CodeOf(got) != connect.CodeAlreadyExists {
		t.Errorf("a Connect error lost its code: %v", got)
	}
	err := ToConnect(errdefs.New(errdefs.ErrSessionBusy, "busy"))
	if connect.CodeOf(err) != connect.CodeAborted || !errors.Is(err, errdefs.ErrSessionBusy) {
		t.Errorf("busy: %v (%v), want Aborted and the class kept", err, connect.CodeOf(err))
	}
	if connect.CodeOf(ToConnect(errors.New("no class"))) != connect.CodeInternal {
		t.Error("an error of no class is not Internal")
	}
}
