package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon"
)

// fileTree is a tree of files the API serves by the same four routes: a
// session's workspace, a volume. Its methods take the tree's key (the
// session id, the volume name), the {key} of the routes' paths.
type fileTree struct {
	key    string
	list   func(ctx context.Context, key string) (*agentapi.FileList, error)
	write  func(ctx context.Context, key, path string, data []byte) error
	read   func(ctx context.Context, key, path string, max int64) ([]byte, error)
	remove func(ctx context.Context, key, path string) error
}

// fileRoutes serves t under base + "/{key}/files".
func (s *Server) fileRoutes(base string, t fileTree) []route {
	files := base + "/{" + t.key + "}/files"
	return []route{
		{http.MethodGet, files, func(w http.ResponseWriter, r *http.Request) { s.listFiles(w, r, t) }},
		{http.MethodPut, files + "/{path...}", func(w http.ResponseWriter, r *http.Request) { s.putFile(w, r, t) }},
		{http.MethodGet, files + "/{path...}", func(w http.ResponseWriter, r *http.Request) { s.getFile(w, r, t) }},
		{http.MethodDelete, files + "/{path...}", func(w http.ResponseWriter, r *http.Request) { s.deleteFile(w, r, t) }},
	}
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, t fileTree) {
	out, err := t.list(r.Context(), r.PathValue(t.key))
	if err != nil {
		writeError(w, err)
		return
	}
	if out.FilesTruncated {
		w.Header().Set(agentapi.HeaderTruncated, "true")
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request, t fileTree) {
	body, release, err := s.bodies.Hold(w, r)
	if err == nil {
		defer release()
		var data []byte
		if data, err = io.ReadAll(body); err != nil {
			err = httpkit.BodyError(w, err)
		} else {
			err = t.write(r.Context(), r.PathValue(t.key), r.PathValue("path"), data)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, t fileTree) {
	p := r.PathValue("path")
	data, err := t.read(r.Context(), r.PathValue(t.key), p, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", daemon.MimeOf(p, data))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_ = httpkit.WriteAll(w, s.cfg.WriteTimeout, data)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, t fileTree) {
	if err := t.remove(r.Context(), r.PathValue(t.key), r.PathValue("path")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
