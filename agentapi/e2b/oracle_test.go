package e2b

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
)

// TestSandboxRoutesNoOracle: without valid credentials for it, a request
// naming a sandbox gets one answer whatever the id names (unknown, ended,
// paused, dead or live), and nothing is done to it: a dead sandbox's
// session and record stay until its own token asks (issue 35).
func TestSandboxRoutesNoOracle(t *testing.T) {
	s, core := newTestServer(t)
	live := create(t, s, keyA, `{}`)
	paused := create(t, s, keyA, `{}`)
	dead := create(t, s, keyA, `{}`)
	ended := create(t, s, keyA, `{}`)
	other := create(t, s, keyB, `{}`)
	core.mu.Lock()
	core.sessions[paused.SandboxID].State = agentapi.SessionParked
	core.sessions[dead.SandboxID].State = agentapi.SessionDead
	core.mu.Unlock()
	if w := do(t, s, "DELETE", "/sandboxes/"+ended.SandboxID, "", map[string]string{"X-API-KEY": keyA}); w.Code != http.StatusNoContent {
		t.Fatalf("kill: %d %s", w.Code, w.Body)
	}
	ids := map[string]string{
		"live": live.SandboxID, "paused": paused.SandboxID, "dead": dead.SandboxID, "ended": ended.SandboxID,
		"unknown": "0123456789abcdef0123456789abcdef",
	}
	for _, port := range []string{"49983", "49999", "8000"} {
		for _, cred := range []struct{ name, hdr, value string }{
			{"none", "", ""},
			{"another sandbox's token", "X-Access-Token", other.EnvdAccessToken},
			{"another sandbox's traffic token", "E2B-Traffic-Access-Token", other.TrafficAccessToken},
			{"another key", "X-API-KEY", keyB},
		} {
			for what, id := range ids {
				hdr := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": port}
				if cred.hdr != "" {
					hdr[cred.hdr] = cred.value
				}
				w := do(t, s, "GET", "/health", "", hdr)
				body := strings.ReplaceAll(w.Body.String(), id, "ID")
				if w.Code != http.StatusUnauthorized || body != strings.ReplaceAll(unknownBody(t, s, port), "0123456789abcdef0123456789abcdef", "ID") {
					t.Errorf("port %s, %s credentials, %s sandbox: %d %s; want the unknown id's 401", port, cred.name, what, w.Code, w.Body)
				}
			}
		}
	}
	if _, err := core.Session(context.Background(), dead.SandboxID); err != nil {
		t.Fatalf("the dead sandbox's session went before any credential: %v", err)
	}
	if s.lookup(dead.SandboxID) == nil {
		t.Fatal("the dead sandbox's record went before any credential")
	}
	// Its own token: the ended and the dead are not running (E2B's 502),
	// the dead one deleted now; the paused one too (502, kept).
	for _, sb := range []sandboxJSON{ended, dead, paused} {
		w := do(t, s, "GET", "/health", "", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983", "X-Access-Token": sb.EnvdAccessToken})
		if w.Code != http.StatusBadGateway {
			t.Errorf("%s with its token: %d %s, want 502", sb.SandboxID, w.Code, w.Body)
		}
	}
	if _, err := core.Session(context.Background(), dead.SandboxID); err == nil || s.lookup(dead.SandboxID) != nil {
		t.Fatal("the dead sandbox was kept after its own token found it dead")
	}
	if s.lookup(paused.SandboxID) == nil {
		t.Fatal("the paused sandbox went")
	}
}

func unknownBody(t *testing.T, s *Server, port string) string {
	t.Helper()
	return do(t, s, "GET", "/health", "", map[string]string{"E2b-Sandbox-Id": "0123456789abcdef0123456789abcdef", "E2b-Sandbox-Port": port}).Body.String()
}
