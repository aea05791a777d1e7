package e2b

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

// gatedCore holds every create until gate is closed.
type gatedCore struct {
	*fakeCore
	entered chan struct{}
	gate    chan struct{}
}

func (c *gatedCore) CreateSessionWith(ctx context.Context, req *agentapi.SessionRequest, so daemon.SessionOptions) (*agentapi.Session, error) {
	c.entered <- struct{}{}
	<-c.gate
	return c.fakeCore.CreateSessionWith(ctx, req, so)
}

// One key holding its budget of requests in flight gets 429 for the
// next, and another key is still served.
func TestKeyRequestsBudget(t *testing.T) {
	keys, err := NewKeys([]string{keyA, keyB})
	if err != nil {
		t.Fatal(err)
	}
	core := &gatedCore{fakeCore: newFakeCore(), entered: make(chan struct{}, 8), gate: make(chan struct{})}
	s, err := New(Config{Core: core, Keys: keys, MaxKeyRequests: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 3)
	createAs := func(key string) {
		go func() { done <- do(t, s, "POST", "/v2/sandboxes", `{}`, map[string]string{"X-API-KEY": key}).Code }()
	}
	reached := func(what string) {
		t.Helper()
		select {
		case <-core.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never reached the core", what)
		}
	}
	createAs(keyA)
	createAs(keyA)
	reached("key A's first create")
	reached("key A's second create")
	third := make(chan *httptest.ResponseRecorder, 1)
	go func() { third <- do(t, s, "POST", "/v2/sandboxes", `{}`, map[string]string{"X-API-KEY": keyA}) }()
	select {
	case w := <-third:
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Errorf("key A's third create with two in flight: %d (Retry-After %q) %s, want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	case <-core.entered:
		close(core.gate)
		t.Fatal("key A's third create, with two in flight, reached the core: want 429")
	}
	createAs(keyB)
	reached("key B's create, beside key A's budget in flight")
	close(core.gate)
	for range 3 {
		if code := <-done; code != http.StatusCreated {
			t.Errorf("a create held in the core: %d, want 201", code)
		}
	}
	if w := do(t, s, "POST", "/v2/sandboxes", `{}`, map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusCreated {
		t.Errorf("key A's create after its requests ended: %d %s", w.Code, w.Body)
	}
}
