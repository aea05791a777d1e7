// Package snapshots serves E2B's snapshots (docs/E2B.md): POST
// /sandboxes/{id}/snapshots, GET /snapshots and DELETE /templates/{id},
// and the lookup through which Sandbox.create(snapshotID) starts a sandbox
// from one. They are the core's session snapshots (daemon/sessions: the
// sandbox's workspace and Python state, kept while it runs on); each is
// its API key's, whose fingerprint its record (the snapshot's Meta)
// keeps: another key's snapshot is a 404 to every route, as an unknown one.
package snapshots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/sessions"
)

// Core is what the snapshot routes need of the daemon; *daemon.Daemon
// implements it.
type Core interface {
	SnapshotSession(ctx context.Context, id string, so sessions.SnapshotOptions) (*sessions.Snapshot, error)
	Snapshots(ctx context.Context) []sessions.Snapshot
	DeleteSnapshot(ctx context.Context, id string) error
	StartFromSnapshot(ctx context.Context, id string, fo sessions.FromSnapshotOptions) (*agentapi.CarriedSession, error)
}

// record is a snapshot's Meta: the key that took it (its fingerprint),
// its name, and the sandbox and template it was taken of.
type record struct {
	Key      string `json:"key"`
	Name     string `json:"name,omitempty"`
	Sandbox  string `json:"sandbox"`
	Template string `json:"template,omitempty"`
}

// Info is E2B's SnapshotInfo, with what nsbox adds: the sandbox it was
// taken of, when, and its size on disk.
type Info struct {
	SnapshotID string    `json:"snapshotID"`
	Names      []string  `json:"names"`
	SandboxID  string    `json:"sandboxID"`
	CreatedAt  time.Time `json:"createdAt"`
	SizeBytes  int64     `json:"sizeBytes"`
}

// Handler serves the routes. Every func is required.
type Handler struct {
	Core Core
	// Key is the fingerprint of the request's API key.
	Key func(r *http.Request) string
	// Sandbox resolves a running sandbox of the request's key to its
	// template, or fails as the endpoint answers (404, a paused one 409).
	Sandbox func(r *http.Request, id string) (template string, err error)
	// Decode reads a request's JSON body (release once done with v).
	Decode   func(w http.ResponseWriter, r *http.Request, v any) (release func(), err error)
	WriteErr func(w http.ResponseWriter, err error)
	Log      *slog.Logger
}

// Register adds the routes to m.
func (h *Handler) Register(m *http.ServeMux) {
	m.HandleFunc("POST /sandboxes/{id}/snapshots", h.handleCreate)
	m.HandleFunc("GET /snapshots", h.handleList)
	m.HandleFunc("DELETE /templates/{id}", h.handleDelete)
}

// MaxNameBytes bounds a snapshot's name.
const MaxNameBytes = 128

// checkName: 1 to MaxNameBytes of A-Z, a-z, 0-9, '.', '_', '-' and '/'
// (E2B's team/name; a ':tag' is not part of a name).
func checkName(n string) error {
	ok := n != "" && len(n) <= MaxNameBytes
	for _, c := range n {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/", c))
	}
	if !ok {
		return errdefs.Field("name", "%q: a snapshot's name is 1 to %d of A-Z, a-z, 0-9, '.', '_', '-' and '/'", n, MaxNameBytes)
	}
	return nil
}

func (h *Handler) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name *string `json:"name"`
	}
	release, err := h.Decode(w, r, &req)
	if err != nil {
		h.WriteErr(w, err)
		return
	}
	defer release()
	rec := record{Key: h.Key(r), Sandbox: r.PathValue("id")}
	if req.Name != nil {
		if err := checkName(*req.Name); err != nil {
			h.WriteErr(w, err)
			return
		}
		rec.Name = *req.Name
	}
	if rec.Template, err = h.Sandbox(r, rec.Sandbox); err != nil {
		h.WriteErr(w, err)
		return
	}
	m, err := json.Marshal(rec)
	if err != nil {
		h.WriteErr(w, err)
		return
	}
	snap, err := h.Core.SnapshotSession(r.Context(), rec.Sandbox, sessions.SnapshotOptions{ID: randomHex(16), Meta: m})
	if err != nil {
		h.Log.Info("e2b: snapshot refused", "sandbox", rec.Sandbox, "err", err)
		h.WriteErr(w, fmt.Errorf("sandbox %q: snapshot: %w", rec.Sandbox, err))
		return
	}
	h.Log.Info("e2b: snapshot taken", "sandbox", rec.Sandbox, "snapshot", snap.ID, "bytes", snap.Bytes)
	writeJSON(w, http.StatusCreated, info(snap, &rec))
}

// owned is the request's key's snapshots, oldest first.
func (h *Handler) owned(r *http.Request) ([]sessions.Snapshot, []record) {
	key := h.Key(r)
	var snaps []sessions.Snapshot
	var recs []record
	for _, s := range h.Core.Snapshots(r.Context()) {
		var rec record
		if json.Unmarshal(s.Meta, &rec) == nil && rec.Key == key && key != "" {
			snaps, recs = append(snaps, s), append(recs, rec)
		}
	}
	return snaps, recs
}

// matches: ref is the snapshot's id or name, either with an optional
// ":tag" (nsbox keeps no tags).
func matches(s *sessions.Snapshot, rec *record, ref string) bool {
	if i := strings.LastIndexByte(ref, ':'); i >= 0 {
		ref = ref[:i]
	}
	return ref != "" && (ref == s.ID || ref == rec.Name)
}

// Lookup is the request's key's snapshot that template names (its id, or
// its name: the newest of that name), if there is one.
func (h *Handler) Lookup(r *http.Request, template string) (id string, ok bool) {
	if template == "" { // the default template
		return "", false
	}
	snaps, recs := h.owned(r)
	for i := len(snaps) - 1; i >= 0; i-- {
		if matches(&snaps[i], &recs[i], template) {
			return snaps[i].ID, true
		}
	}
	return "", false
}

func (h *Handler) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &limit); err != nil || limit < 1 || limit > 1000 {
			h.WriteErr(w, errdefs.Field("limit", "%q: 1 to 1000", v))
			return
		}
	}
	after := q.Get("nextToken")
	snaps, recs := h.owned(r)
	out := []Info{}
	for i := range snaps {
		s, rec := &snaps[i], &recs[i]
		switch {
		case after != "":
			if s.ID == after {
				after = ""
			}
			continue
		case q.Get("sandboxID") != "" && rec.Sandbox != q.Get("sandboxID"):
			continue
		case q.Get("name") != "" && !matches(s, rec, q.Get("name")):
			continue
		}
		if len(out) == limit {
			w.Header().Set("X-Next-Token", out[len(out)-1].SnapshotID)
			break
		}
		out = append(out, info(s, rec))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	snaps, recs := h.owned(r)
	for i := range snaps {
		if matches(&snaps[i], &recs[i], id) {
			id = snaps[i].ID
			if err := h.Core.DeleteSnapshot(r.Context(), id); err != nil {
				h.WriteErr(w, err)
				return
			}
			h.Log.Info("e2b: snapshot deleted", "snapshot", id)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	h.WriteErr(w, errdefs.In(errdefs.ErrNotFound, fmt.Errorf("template or snapshot %q not found (nsbox's templates are its rootfs trees and profiles, which this route does not remove)", id)))
}

func info(s *sessions.Snapshot, rec *record) Info {
	names := []string{}
	if rec.Name != "" {
		names = append(names, rec.Name)
	}
	return Info{SnapshotID: s.ID, Names: names, SandboxID: rec.Sandbox, CreatedAt: s.CreatedAt.UTC(), SizeBytes: s.Bytes}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
