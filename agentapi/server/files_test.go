package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

// cutList is a core whose session file lists are cut at their cap when cut.
type cutList struct {
	Core
	cut bool
}

func (c cutList) ListFiles(context.Context, string) (*agentapi.FileList, error) {
	return &agentapi.FileList{Files: []agentapi.WorkspaceFile{{Path: "a"}}, FilesTruncated: c.cut}, nil
}

// A cut file list says so in its body and in a header; a whole one in
// neither.
func TestFileListSaysWhenCut(t *testing.T) {
	for _, cut := range []bool{false, true} {
		ts := startServer(t, nil, func(c *testConfig) {
			c.WrapCore = func(core Core) Core { return cutList{Core: core, cut: cut} }
		})
		resp, err := ts.http.Get("http://nsbox/v1/sessions/s1/files")
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("cut %v: status %d, %v", cut, resp.StatusCode, err)
		}
		header := resp.Header.Get(agentapi.HeaderTruncated) == "true"
		_, field := body["files_truncated"]
		if header != cut || field != cut {
			t.Errorf("cut %v: header %v, files_truncated in the body %v", cut, header, field)
		}
	}
}

// A run's result says when its file list was cut.
func TestRunResultSaysWhenFilesCut(t *testing.T) {
	runner := &fakeRunner{fn: func(_ context.Context, spec container.Spec) (*container.Result, error) {
		return &container.Result{ID: spec.ID, Status: container.StatusOK, Files: []container.FileInfo{{Path: "a"}}, FilesTruncated: true}, nil
	}}
	ts := startServer(t, runner, nil)
	res, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.FilesTruncated || len(res.Files) != 1 {
		t.Errorf("result %+v: want files_truncated with its one file", res)
	}
}
