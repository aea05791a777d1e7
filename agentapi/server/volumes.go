package server

import (
	"net/http"

	"github.com/nsbox/nsbox/agentapi"
)

func (s *Server) volumeRoutes() []route {
	v := "/" + agentapi.Version + "/volumes"
	routes := []route{
		{http.MethodPost, v, s.handleVolumeCreate},
		{http.MethodGet, v, s.handleVolumeList},
		{http.MethodGet, v + "/{name}", s.handleVolumeGet},
		{http.MethodDelete, v + "/{name}", s.handleVolumeDelete},
	}
	return append(routes, s.fileRoutes(v, fileTree{key: "name",
		list: s.core.ListVolumeFiles, write: s.core.WriteVolumeFile, read: s.core.ReadVolumeFile, remove: s.core.RemoveVolumeFile})...)
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
