package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon"
)

// richAnswers is a core whose session execs answer with big, tricky
// outputs, a file and a figure.
type richAnswers struct {
	Core
	res agentapi.RunResult
}

func (c richAnswers) Exec(_ context.Context, _ string, _ *agentapi.ExecRequest, opts daemon.RunOptions) (*agentapi.RunResult, error) {
	out := c.res
	if opts.OnStart != nil {
		opts.OnStart(out.ID)
	}
	opts.OnResult(&out)
	return &out, nil
}

// A run result past the piecewise threshold is answered byte for byte as
// json.Marshal encodes it, as one JSON answer and as a stream's result
// event.
func TestBigResultAnswerIsMarshalBytes(t *testing.T) {
	tricky := "é€😀 <b>&amp;</b> \u2028\u2029 \x00\x1f\t\n\"\\ \ufffd"
	res := agentapi.RunResult{
		ID: "r1", Status: "ok",
		Stdout:       strings.Repeat(tricky, 3<<20/len(tricky)),
		Stderr:       strings.Repeat("\xff\xfe", 1000),
		StderrBase64: "//4=",
		Value:        "'<x>'",
		Files:        []agentapi.FileResult{{Path: "a.bin", Size: 3, ContentBase64: strings.Repeat("QUJD", 1<<18)}},
		Figures:      []agentapi.Figure{{Mime: "image/png", DataBase64: "iVBOR"}},
	}
	ts := startServer(t, nil, func(c *testConfig) {
		c.WrapCore = func(core Core) Core { return richAnswers{Core: core, res: res} }
	})
	marshalled, err := json.Marshal(&res)
	if err != nil {
		t.Fatal(err)
	}
	if bigJSON(&res) == nil {
		t.Fatal("the result is not past the piecewise threshold: the test would not test it")
	}
	post := func(accept string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", "http://nsbox/v1/sessions/s1/exec", strings.NewReader(`{"code":"1"}`))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := ts.http.Do(req)
		if err != nil {
			t.Fatal(err, ts.logs.String())
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	resp, body := post("")
	want := append(append([]byte(nil), marshalled...), '\n')
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("JSON answer: %s, %d bytes, want the %d bytes json.Marshal gives", resp.Status, len(body), len(want))
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length %q, want %d", cl, len(want))
	}

	_, body = post(agentapi.ContentTypeNDJSON)
	ev, err := json.Marshal(agentapi.Event{Type: agentapi.EventResult, Result: &res})
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(body, []byte("\n"))
	var last []byte
	for _, l := range lines {
		if len(l) > 0 {
			last = l
		}
	}
	if !bytes.Equal(last, append(ev, '\n')) {
		t.Fatalf("stream's result event: %d bytes, want the %d bytes json.Marshal gives", len(last), len(ev)+1)
	}
}
