package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/nsbox/nsbox/agentapi"
)

// CreateVolume makes a named volume of req.SizeBytes (POST /v1/volumes).
func (c *Client) CreateVolume(ctx context.Context, req *agentapi.VolumeRequest) (*agentapi.Volume, error) {
	var v agentapi.Volume
	if err := c.doJSON(ctx, http.MethodPost, "/volumes", req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volumes lists the named volumes.
func (c *Client) Volumes(ctx context.Context) ([]agentapi.Volume, error) {
	var l agentapi.VolumeList
	if err := c.get(ctx, "/volumes", &l); err != nil {
		return nil, err
	}
	return l.Volumes, nil
}

// Volume describes one named volume (size and use).
func (c *Client) Volume(ctx context.Context, name string) (*agentapi.Volume, error) {
	var v agentapi.Volume
	if err := c.get(ctx, "/volumes/"+url.PathEscape(name), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolume removes a volume and its data; a volume a live sandbox
// mounts is refused (409, code "in_use": errors.Is(err, errdefs.ErrInUse)).
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), nil, nil)
}

func volumeFilePath(name, p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return baseURL + "/volumes/" + url.PathEscape(name) + "/files/" + strings.Join(parts, "/")
}

// PutVolumeFile writes data to path (relative to the volume's root).
func (c *Client) PutVolumeFile(ctx context.Context, name, path string, data io.Reader) error {
	return c.volumeFileCall(ctx, http.MethodPut, name, path, data, nil)
}

// GetVolumeFile reads a regular file of a volume; a symlink is never
// followed.
func (c *Client) GetVolumeFile(ctx context.Context, name, path string) ([]byte, error) {
	var out []byte
	err := c.volumeFileCall(ctx, http.MethodGet, name, path, nil, &out)
	return out, err
}

// DeleteVolumeFile removes a file (or an empty directory) of a volume.
func (c *Client) DeleteVolumeFile(ctx context.Context, name, path string) error {
	return c.volumeFileCall(ctx, http.MethodDelete, name, path, nil, nil)
}

// VolumeFiles lists every entry of a volume (symlinks listed, never
// followed).
func (c *Client) VolumeFiles(ctx context.Context, name string) (*agentapi.FileList, error) {
	var l agentapi.FileList
	if err := c.get(ctx, "/volumes/"+url.PathEscape(name)+"/files", &l); err != nil {
		return nil, err
	}
	return &l, nil
}

func (c *Client) volumeFileCall(ctx context.Context, method, name, path string, body io.Reader, out *[]byte) error {
	hr, err := http.NewRequestWithContext(ctx, method, volumeFilePath(name, path), body)
	if err != nil {
		return err
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := c.do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out != nil {
		*out, err = io.ReadAll(resp.Body)
	}
	return err
}
