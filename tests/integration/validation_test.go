package integration

import (
	"context"
	"net/http"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestRefusedBeforeSandboxWork: a bad limit, env, context or idle_action is
// a 400 naming its field, plain and streamed, before any sandbox work: no
// session is made, a parked session stays parked, no exec starts.
func TestRefusedBeforeSandboxWork(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		req   agentapi.SessionRequest
		field string
	}{
		{"memory below the minimum", agentapi.SessionRequest{Limits: &agentapi.Limits{MemoryBytes: 1}}, "limits.memory_bytes: 1 is below the minimum"},
		{"pids below the minimum", agentapi.SessionRequest{Limits: &agentapi.Limits{Pids: 1}}, "limits.pids: 1 is below the minimum"},
		{"bad idle_action", agentapi.SessionRequest{IdleAction: "sleep"}, "idle_action:"},
		{"bad env name", agentapi.SessionRequest{Env: map[string]string{"1A": "x"}}, "env:"},
		{"negative lifetime", agentapi.SessionRequest{LifetimeMs: -1}, "lifetime_ms:"},
	} {
		t.Run("session/"+tc.name, func(t *testing.T) {
			_, err := d.client.CreateSession(ctx, &tc.req)
			wantStatus(t, err, http.StatusBadRequest, tc.field)
		})
	}
	for _, stream := range []bool{false, true} {
		req := &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "print(1)", Limits: &agentapi.Limits{MemoryBytes: 1}}
		var err error
		if stream {
			_, err = d.client.RunStream(ctx, req, func(ev agentapi.Event) { t.Errorf("stream event %+v before a refusal", ev) })
		} else {
			_, err = d.client.Run(ctx, req)
		}
		wantStatus(t, err, http.StatusBadRequest, "limits.memory_bytes: 1 is below the minimum")
	}
	if l, err := d.client.Sessions(ctx); err != nil || len(l) != 0 {
		t.Fatalf("sessions after refused creates: %+v %v", l, err)
	}
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Fatalf("refused requests left sandboxes: %q", c)
	}

	id := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, id, "n = 41")
	park(t, d, id)
	for _, tc := range []struct {
		name  string
		req   agentapi.ExecRequest
		field string
	}{
		{"bad env name", agentapi.ExecRequest{Code: "n", Env: map[string]string{"A-B": "x"}}, "env:"},
		{"NUL in env", agentapi.ExecRequest{Code: "n", Env: map[string]string{"A": "\x00"}}, "env.A: value contains NUL"},
		{"bad context", agentapi.ExecRequest{Code: "n", Context: "a b"}, "context:"},
		{"negative timeout", agentapi.ExecRequest{Code: "n", TimeoutMs: -1}, "timeout_ms: -1 is negative"},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run("exec/"+name, func(t *testing.T) {
				var err error
				if stream {
					_, err = d.client.ExecStream(ctx, id, &tc.req, func(ev agentapi.Event) { t.Errorf("stream event %+v before a refusal", ev) })
				} else {
					_, err = d.client.Exec(ctx, id, &tc.req)
				}
				wantStatus(t, err, http.StatusBadRequest, tc.field)
				if s, err := d.client.Session(ctx, id); err != nil || s.State != agentapi.SessionParked {
					t.Fatalf("after a refused exec the session is %+v (%v), want still parked", s, err)
				}
			})
		}
	}
	if c := d.leftoverCgroups(t); len(c) > 0 {
		t.Fatalf("refused execs revived the parked session: %q", c)
	}
	// A good exec still revives it, with its state.
	if res := execOK(t, d, id, "n + 1"); !res.Revived || res.Value != "42" {
		t.Fatalf("exec after the refusals: revived %v value %q", res.Revived, res.Value)
	}
}
