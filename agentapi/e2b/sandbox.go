package e2b

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/nsbox/nsbox/agentapi/e2b/interp"
	"github.com/nsbox/nsbox/agentapi/e2b/network"
)

// sandbox is what the endpoint keeps of an E2B sandbox beyond its nsbox
// session: who owns it, its tokens, and what E2B reports of it.
type sandbox struct {
	id       string
	key      int    // the index of the API key that created it
	token    string // envdAccessToken
	traffic  string // trafficAccessToken (the code interpreter's plane)
	template string
	alias    string
	metadata map[string]string
	envs     map[string]string
	started  time.Time
	cpus     float64
	memoryMB int64
	diskMB   int64
	// autoPause: its timeout parks its session (lifecycle.onTimeout
	// "pause").
	autoPause bool

	// keep orders the writes of its record (keepRecord): the last
	// one written is the last one made.
	keep sync.Mutex

	mu       sync.Mutex
	contexts map[string]codeContext
	// network is its network option (nil: none given); replaced whole
	// by updateNetwork.
	network *network.Info
	// The last CPU sample, for metrics' cpuUsedPct.
	lastCPU time.Duration
	lastAt  time.Time
}

// networkInfo is sb's network option now (nil: none given).
func (sb *sandbox) networkInfo() *network.Info {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.network
}

// codeContext is one code interpreter context (interp.Context).
type codeContext = interp.Context

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lookup returns the live sandbox with id, or nil.
func (s *Server) lookup(id string) *sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[id]
}

// forget drops a sandbox whose session is gone (its record went with it),
// keeping its credentials among the ended.
func (s *Server) forget(id string) {
	s.mu.Lock()
	if sb := s.sandboxes[id]; sb != nil {
		s.ended.add(sb)
	}
	delete(s.sandboxes, id)
	s.mu.Unlock()
	s.cwds.Forget(id)
}

// endedOne returns the credentials of a sandbox that ended, or nil.
func (s *Server) endedOne(id string) *sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended.byID[id]
}

// maxTombstones bounds the ended sandboxes whose credentials are kept
// (about 200 bytes each), the oldest dropped first.
const maxTombstones = 4096

// tombstones are the credentials of sandboxes that ended (id, tokens, key),
// so that a request naming one is judged by them as a live one's is:
// its owner learns it ended (502, E2B's "not running"), anyone else gets
// the 401 an unknown id gets. Held under Server.mu.
type tombstones struct {
	byID  map[string]*sandbox
	order []string
}

func (t *tombstones) add(sb *sandbox) {
	if t.byID == nil {
		t.byID = map[string]*sandbox{}
	}
	if _, ok := t.byID[sb.id]; !ok {
		t.order = append(t.order, sb.id)
	}
	t.byID[sb.id] = &sandbox{id: sb.id, key: sb.key, token: sb.token, traffic: sb.traffic}
	for len(t.order) > maxTombstones {
		delete(t.byID, t.order[0])
		t.order = t.order[1:]
	}
}

// owned returns the sandbox with id if the caller's key created it.
func (s *Server) owned(key int, id string) *sandbox {
	sb := s.lookup(id)
	if sb == nil || sb.key != key {
		return nil
	}
	return sb
}

// ofKey lists the sandboxes of a key.
func (s *Server) ofKey(key int) []*sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*sandbox
	for _, sb := range s.sandboxes {
		if sb.key == key {
			out = append(out, sb)
		}
	}
	return out
}
