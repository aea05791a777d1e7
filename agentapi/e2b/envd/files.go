package envd

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"

	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// entryJSON is envd's EntryInfo as /files answers it.
type entryJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

func (s *server) handleEnvs(w http.ResponseWriter, r *http.Request) {
	envs := map[string]string{}
	for k, v := range s.cfg.Sandbox(r.Context()).Envs {
		envs[k] = v
	}
	writeJSON(w, http.StatusOK, envs)
}

// handleDownload is GET /files?path=P: the file's bytes.
func (s *server) handleDownload(w http.ResponseWriter, r *http.Request) {
	id := s.id(r.Context())
	rel, err := workspacePath("path", r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := s.core.OpenFile(r.Context(), id, rel)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(sandboxPath(rel))}))
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.WriteHeader(http.StatusOK)
	// The size is the one just read: a file the sandbox grows meanwhile
	// is cut there, one it shrinks ends the body early.
	_, _ = io.CopyN(w, f, st.Size())
}

// handleUpload is POST /files: a multipart form of "file" parts (each
// part's file name is its path when ?path is absent) or, with
// Content-Type application/octet-stream, the body as the file at ?path
// (gzip when Content-Encoding says so). Parent directories are made.
func (s *server) handleUpload(w http.ResponseWriter, r *http.Request) {
	id := s.id(r.Context())
	// Streamed into the workspace, never held whole: capped and due within
	// UploadTimeout (a client that stops sending mid-body does not hold
	// its connection, and a place of MaxConns, for ever), but taking
	// nothing from the budget of held bodies.
	reqBody, release, err := httpkit.Stream(w, r, s.cfg.MaxUploadBytes, s.cfg.UploadTimeout)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	qpath := r.URL.Query().Get("path")
	var out []entryJSON
	write := func(p string, body io.Reader) error {
		rel, err := workspacePath("path", p)
		if err != nil {
			return err
		}
		if rel == "" {
			return errdefs.Field("path", "%q is the home directory itself; name a file under it", p)
		}
		if _, err := s.core.WriteFrom(r.Context(), id, rel, body); err != nil {
			return err
		}
		out = append(out, entryJSON{Name: path.Base(rel), Type: "file", Path: sandboxPath(rel)})
		return nil
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/octet-stream":
		body := reqBody
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, zerr := gzip.NewReader(reqBody)
			if zerr != nil {
				writeError(w, errdefs.Field("", "gzip body: %v", zerr))
				return
			}
			defer zr.Close()
			body = &inflateCap{r: zr, left: s.cfg.MaxUploadBytes}
		}
		err = write(qpath, body)
	case "multipart/form-data":
		mr := multipart.NewReader(reqBody, params["boundary"])
		for {
			part, perr := mr.NextPart()
			if errors.Is(perr, io.EOF) {
				break
			}
			if perr != nil {
				err = errdefs.Field("", "multipart body: %v", perr)
				break
			}
			if part.FormName() != "file" {
				continue
			}
			p := qpath
			if p == "" {
				// The part's file name is the file's whole path;
				// Part.FileName would keep only its last element.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = cd["filename"]
			}
			if err = write(p, part); err != nil {
				break
			}
		}
		if err == nil && len(out) == 0 {
			err = errdefs.Field("file", "the form has no file part")
		}
	default:
		err = errdefs.Field("Content-Type", "%q: send multipart/form-data (file parts) or application/octet-stream", ct)
	}
	if err != nil {
		writeError(w, fmt.Errorf("upload: %w", httpkit.BodyError(w, err)))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// inflateCap reads an upload's inflated bytes up to the upload cap and
// fails with a too-large error past it, so that the write fails and its
// file is removed (413), not stored cut at the cap (200).
type inflateCap struct {
	r    io.Reader
	left int64
}

func (c *inflateCap) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		return 0, errdefs.New(errdefs.ErrTooLarge, "the gzip body inflates past the upload cap")
	}
	c.left -= int64(n)
	return n, err
}
