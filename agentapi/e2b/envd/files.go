package envd

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strconv"

	"github.com/nsbox/nsbox/agentapi/httpkit"
	"github.com/nsbox/nsbox/container/procs"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// entryJSON is envd's EntryInfo as /files answers it.
type entryJSON struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata,omitempty"`
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
	t, err := sandboxTarget("path", r.URL.Query().Get("path"))
	if err != nil {
		writeError(w, err)
		return
	}
	var f io.ReadCloser
	var size int64
	if t.ws {
		var of *os.File
		if of, err = s.core.OpenFile(r.Context(), id, t.rel); err == nil {
			f = of
			var st os.FileInfo
			if st, err = of.Stat(); err == nil {
				size = st.Size()
			}
		}
	}
	inSandbox := !t.ws || retryInSandbox(err)
	if inSandbox {
		err = s.inSandbox(r.Context(), func(a *procs.Agent) error {
			af, err := a.Open(r.Context(), t.abs)
			if err == nil {
				f, size = af, af.Size()
			}
			return err
		})
	}
	if f != nil {
		defer f.Close()
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(t.abs)}))
	if size == 0 && inSandbox {
		// A file of /proc or /sys says 0 and has content: sent to its
		// end, chunked, as envd sends it.
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, f)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	// The size is the one just read: a file the sandbox grows meanwhile
	// is cut there, one it shrinks ends the body early.
	_, _ = io.CopyN(w, f, size)
}

// writeAnywhere streams body into the file at abs through the agent (made
// or truncated, parents made) and replaces its metadata with meta; it
// returns the metadata the file holds. A write that fails removes the
// file, as the workspace's does.
func (s *server) writeAnywhere(ctx context.Context, abs string, body io.Reader, meta map[string]string) (map[string]string, error) {
	a, err := s.agent(ctx)
	if err != nil {
		return nil, err
	}
	f, err := a.Create(ctx, abs)
	if err != nil {
		return nil, fileError(err)
	}
	var got map[string]string
	_, err = io.Copy(f, body)
	if err == nil {
		if got, err = f.SetMeta(meta); err != nil {
			err = metaError(abs, err)
		}
	}
	if cerr := f.Close(); err == nil {
		err = fileError(cerr)
	}
	if err != nil {
		_ = a.RemoveAll(context.WithoutCancel(ctx), abs)
		return nil, fileError(err)
	}
	return got, nil
}

// handleUpload is POST /files: a multipart form of "file" parts (each
// part's file name is its path when ?path is absent) or, with
// Content-Type application/octet-stream, the body as the file at ?path
// (gzip when Content-Encoding says so). Parent directories are made.
// Every file gets the X-Metadata-* headers' metadata (metadata.go), none
// when there are none.
func (s *server) handleUpload(w http.ResponseWriter, r *http.Request) {
	id := s.id(r.Context())
	meta, err := uploadMeta(r.Header)
	if err != nil {
		writeError(w, fmt.Errorf("upload: %w", err))
		return
	}
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
	root := rootUser(r.Header, r.URL.Query().Get("username"))
	write := func(p string, body io.Reader) error {
		var got map[string]string
		t, err := sandboxTarget("path", p)
		if err == nil {
			err = checkWrite(t, root)
		}
		switch {
		case err != nil:
			return err
		case t.ws && t.rel == "":
			return errdefs.Field("path", "%q is the home directory itself; name a file under it", p)
		case t.ws:
			cr := &countReader{r: body}
			_, err = s.core.WriteFrom(r.Context(), id, t.rel, cr)
			switch {
			case retryInSandbox(err) && cr.n == 0:
				got, err = s.writeAnywhere(r.Context(), t.abs, body, meta)
			case err == nil:
				if got, err = s.setMeta(r.Context(), sandboxPath(t.rel), meta); err != nil {
					_ = s.core.RemoveAll(context.WithoutCancel(r.Context()), id, t.rel)
				}
			}
		default:
			got, err = s.writeAnywhere(r.Context(), t.abs, body, meta)
		}
		if err != nil {
			return err
		}
		abs := t.abs
		if t.ws {
			abs = sandboxPath(t.rel)
		}
		out = append(out, entryJSON{Name: path.Base(abs), Type: "file", Path: abs, Metadata: got})
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

// countReader counts what was read of an upload's body: a workspace
// write that failed before reading any is tried again in the sandbox.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
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
