package server

import (
	"fmt"
	"io"
	"net/http"
	"path"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

func (s *Server) volumeRoutes() []route {
	v := "/" + agentapi.Version + "/volumes"
	return []route{
		{http.MethodPost, v, s.handleVolumeCreate},
		{http.MethodGet, v, s.handleVolumeList},
		{http.MethodGet, v + "/{name}", s.handleVolumeGet},
		{http.MethodDelete, v + "/{name}", s.handleVolumeDelete},
		{http.MethodGet, v + "/{name}/files", s.handleVolumeFileList},
		{http.MethodPut, v + "/{name}/files/{path...}", s.handleVolumeFilePut},
		{http.MethodGet, v + "/{name}/files/{path...}", s.handleVolumeFileGet},
		{http.MethodDelete, v + "/{name}/files/{path...}", s.handleVolumeFileDelete},
	}
}

func (s *Server) handleVolumeCreate(w http.ResponseWriter, r *http.Request) {
	var req agentapi.VolumeRequest
	release, err := s.decode(w, r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	v, err := s.core.CreateVolume(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) handleVolumeList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, agentapi.VolumeList{Volumes: s.core.Volumes(r.Context())})
}

func (s *Server) handleVolumeGet(w http.ResponseWriter, r *http.Request) {
	v, err := s.core.Volume(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleVolumeDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.core.DeleteVolume(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleVolumeFileList(w http.ResponseWriter, r *http.Request) {
	out, err := s.core.ListVolumeFiles(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	if out.FilesTruncated {
		w.Header().Set(agentapi.HeaderTruncated, "true")
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleVolumeFilePut(w http.ResponseWriter, r *http.Request) {
	body, release, err := s.body(w, r)
	if err == nil {
		defer release()
		var data []byte
		if data, err = io.ReadAll(body); err != nil {
			err = bodyError(w, err)
		} else {
			err = s.core.WriteVolumeFile(r.Context(), r.PathValue("name"), r.PathValue("path"), data)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleVolumeFileGet(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	data, err := s.core.ReadVolumeFile(r.Context(), r.PathValue("name"), p, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", daemon.MimeOf(p, data))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Server) handleVolumeFileDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.core.RemoveVolumeFile(r.Context(), r.PathValue("name"), r.PathValue("path")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
