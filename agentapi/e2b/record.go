package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/e2b/network"
	"github.com/nsbox/nsbox/daemon"
)

// What the endpoint knows of a sandbox beyond its nsbox session (its
// key, tokens and E2B fields) is kept with the session, as its Meta
// (daemon.SessionOptions.Meta): set at create, again when its code
// contexts change, written by the core into the parked session's
// record.json when it is paused (by the SDK or its timeout), and read
// back at start. One store on disk: a paused sandbox is its key's, with
// the same tokens, after a daemon restart, and goes when its session
// goes. The key is kept as its SHA-256, never the key itself.

// record is a sandbox's part of its session's Meta, {"e2b": record}. Its
// fields are those of the files an older endpoint kept in
// <state_dir>/e2b/<id>.json (migrate.go reads them with it).
type record struct {
	ID       string                 `json:"id"`
	Key      string                 `json:"key_sha256"`
	Token    string                 `json:"envd_access_token"`
	Traffic  string                 `json:"traffic_access_token"`
	Template string                 `json:"template"`
	Alias    string                 `json:"alias,omitempty"`
	Metadata map[string]string      `json:"metadata,omitempty"`
	Envs     map[string]string      `json:"envs,omitempty"`
	Started  time.Time              `json:"started_at"`
	CPUs     float64                `json:"cpus"`
	MemoryMB int64                  `json:"memory_mb"`
	DiskMB   int64                  `json:"disk_mb"`
	Contexts map[string]codeContext `json:"contexts"`
	// AutoPause: its timeout pauses it (lifecycle.onTimeout "pause").
	AutoPause bool `json:"auto_pause,omitempty"`
	// Network is its network option (E2B's names), if create had one.
	Network *network.Info `json:"network,omitempty"`
}

// metaDoc is the session's Meta: the endpoint's record under its name.
type metaDoc struct {
	E2B *record `json:"e2b"`
}

// recordOf is sb's record now.
func recordOf(sb *sandbox, keys *Keys) *record {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return &record{ID: sb.id, Key: keys.Fingerprint(sb.key), Token: sb.token, Traffic: sb.traffic, Template: sb.template,
		Alias: sb.alias, Metadata: sb.metadata, Envs: sb.envs, Started: sb.started, CPUs: sb.cpus, MemoryMB: sb.memoryMB,
		DiskMB: sb.diskMB, Contexts: maps.Clone(sb.contexts), AutoPause: sb.autoPause, Network: sb.network}
}

func (rec *record) meta() (json.RawMessage, error) {
	return json.Marshal(metaDoc{E2B: rec})
}

// sandbox makes rec's sandbox, of the key at index key.
func (rec *record) sandbox(key int) *sandbox {
	contexts := rec.Contexts
	if contexts == nil {
		contexts = map[string]codeContext{}
	}
	return &sandbox{id: rec.ID, key: key, token: rec.Token, traffic: rec.Traffic, template: rec.Template,
		alias: rec.Alias, metadata: rec.Metadata, envs: rec.Envs, started: rec.Started, cpus: rec.CPUs,
		memoryMB: rec.MemoryMB, diskMB: rec.DiskMB, contexts: contexts, autoPause: rec.AutoPause, network: rec.Network}
}

// recordFrom reads the record in a session's Meta: nil when the session
// is not an E2B sandbox's.
func recordFrom(id string, m json.RawMessage) (*record, error) {
	if len(m) == 0 {
		return nil, nil
	}
	var doc metaDoc
	if err := json.Unmarshal(m, &doc); err != nil {
		return nil, err
	}
	if doc.E2B != nil && doc.E2B.ID != id {
		return nil, fmt.Errorf("the record of %q", doc.E2B.ID)
	}
	return doc.E2B, nil
}

// keepRecord sets sb's record as its session's Meta: after its create
// and whenever what the record holds changes (its code contexts). A
// session that was parked meanwhile (its timeout, autoPause) has its
// record.json written again by the core.
func (s *Server) keepRecord(ctx context.Context, sb *sandbox) error {
	sb.keep.Lock()
	defer sb.keep.Unlock()
	m, err := recordOf(sb, s.cfg.Keys).meta()
	if err == nil {
		err = s.core.SetSessionMeta(ctx, sb.id, m)
	}
	if err != nil {
		return fmt.Errorf("sandbox %q: its record: %w", sb.id, err)
	}
	return nil
}

// load returns the sandboxes of the parked sessions whose Meta is an E2B
// record of a key still in the keys file: the paused sandboxes of a
// daemon that restarted. A record of a key no longer in the keys file is
// not loaded (no key could reach it) and stays in its session, so that
// putting the key back makes it reachable again.
func (s *Server) load(ctx context.Context) []*sandbox {
	ctx = daemon.WithCaller(ctx, daemon.Caller{UID: 0})
	var out []*sandbox
	for _, sess := range s.core.Sessions(ctx) {
		if sess.State != agentapi.SessionParked {
			continue
		}
		m, err := s.core.SessionMeta(ctx, sess.ID)
		var rec *record
		if err == nil {
			rec, err = recordFrom(sess.ID, m)
		}
		if err != nil {
			s.log.Warn("e2b: a paused sandbox's record cannot be read; its session is left as it is", "sandbox", sess.ID, "err", err)
			continue
		}
		if rec == nil {
			continue
		}
		key := s.cfg.Keys.ByFingerprint(rec.Key)
		if key < 0 {
			s.log.Warn("e2b: a paused sandbox's API key is no longer in the keys file; it is unreachable until the key is back", "sandbox", sess.ID)
			continue
		}
		out = append(out, rec.sandbox(key))
	}
	return out
}
