package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container"
)

func TestRunHappyPath(t *testing.T) {
	ts := startServer(t, nil, nil)
	req := &agentapi.RunRequest{
		Argv:  []string{"cat", "in.txt"},
		Stdin: "hello",
		Files: []agentapi.File{
			{Path: "in.txt", Text: "data"},
			{Path: "dir/bin.dat", ContentBase64: base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), Mode: 0o755},
		},
		Env:         map[string]string{"B": "2", "A": "1"},
		Limits:      &agentapi.Limits{TimeoutMs: 1500, MemoryBytes: 16 << 20},
		Rootfs:      "other",
		ReturnFiles: []string{"*.png"},
	}
	res, err := ts.client.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOK || res.Stdout != "ok\n" || res.StdoutBytes != 3 || res.ID == "" || res.StdoutBase64 != "" {
		t.Errorf("result = %+v", res)
	}
	sp := ts.runner.lastSpec(t)
	if sp.ID != res.ID {
		t.Errorf("spec id %q, result id %q", sp.ID, res.ID)
	}
	if want := []string{"cat", "in.txt"}; !reflect.DeepEqual(sp.Argv, want) {
		t.Errorf("argv = %q, want %q", sp.Argv, want)
	}
	if want := []string{"A=1", "B=2"}; !reflect.DeepEqual(sp.Env, want) {
		t.Errorf("env = %q, want %q", sp.Env, want)
	}
	if sp.RootfsDir != ts.store.dirs["other"] {
		t.Errorf("rootfs dir = %q, want %q", sp.RootfsDir, ts.store.dirs["other"])
	}
	wantFiles := []container.File{{Path: "in.txt", Data: []byte("data"), Mode: 0o644}, {Path: "dir/bin.dat", Data: []byte{0, 1, 2}, Mode: 0o755}}
	if !reflect.DeepEqual(sp.Files, wantFiles) {
		t.Errorf("files = %+v, want %+v", sp.Files, wantFiles)
	}
	d := container.DefaultLimits()
	if sp.Limits.Timeout != 1500*time.Millisecond || sp.Limits.MemoryBytes != 16<<20 || sp.Limits.Pids != d.Pids || sp.Limits.CPUs != d.CPUs {
		t.Errorf("limits = %+v", sp.Limits)
	}
	stdin, _ := io.ReadAll(sp.Stdin)
	if string(stdin) != "hello" {
		t.Errorf("stdin = %q", stdin)
	}
	if !reflect.DeepEqual(sp.ReturnFiles, []string{"*.png"}) {
		t.Errorf("return files = %q", sp.ReturnFiles)
	}
	if n := ts.store.holding(); n != 0 {
		t.Errorf("%d rootfs still held after the run", n)
	}
	if !strings.Contains(ts.logs.String(), `"run":"`+res.ID+`"`) {
		t.Errorf("logs do not carry the run id:\n%s", ts.logs)
	}
	// The request line is logged once the handler returns, which may be
	// after the client has its answer.
	uid := fmt.Sprintf(`"uid":%d`, os.Getuid())
	for deadline := time.Now().Add(time.Minute); !strings.Contains(ts.logs.String(), uid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs do not carry the peer uid:\n%s", ts.logs)
		}
	}
}

func TestResultConversion(t *testing.T) {
	ts := startServer(t, &fakeRunner{fn: func(_ context.Context, sp container.Spec) (*container.Result, error) {
		return &container.Result{
			ID: sp.ID, Status: container.StatusExitNonzero, ExitCode: 3,
			Stdout: []byte("caf\xc3\xa9"), Stderr: []byte{0xff, 'x'}, StderrTruncated: true, StderrBytes: 99,
			WallTime: 1500 * time.Millisecond, CPUTime: 20 * time.Millisecond, MemoryPeakBytes: 4096,
			Files: []container.FileInfo{
				{Path: "plot.png", Size: 3, SHA256: "abc", Mode: 0o644, Content: []byte("png")},
				{Path: "out", Size: 1, SHA256: "def", Mode: 0o600},
			},
		}, nil
	}}, nil)
	res, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &agentapi.RunResult{
		ID: res.ID, Status: "exit_nonzero", ExitCode: 3,
		Stdout: "café", Stderr: "\uFFFDx", StderrBase64: base64.StdEncoding.EncodeToString([]byte{0xff, 'x'}),
		StderrTruncated: true, StderrBytes: 99, WallMs: 1500, CPUMs: 20, MemoryPeakBytes: 4096,
		Files: []agentapi.FileResult{
			{Path: "plot.png", Size: 3, SHA256: "abc", Mime: "image/png", Mode: 0o644, ContentBase64: base64.StdEncoding.EncodeToString([]byte("png"))},
			{Path: "out", Size: 1, SHA256: "def", Mode: 0o600},
		},
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("result\n got %+v\nwant %+v", res, want)
	}
}

func TestLanguages(t *testing.T) {
	tests := []struct {
		name     string
		language string
		withBash bool
		want     []string
	}{
		{"python", "python", false, []string{"python3", "-c", "CODE"}},
		{"bash present", "bash", true, []string{"bash", "-c", "CODE"}},
		{"bash missing", "bash", false, []string{"/bin/sh", "-c", "CODE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, nil, nil)
			if tc.withBash {
				dir := filepath.Join(ts.store.dirs["default"], "usr/bin")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "bash"), nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Language: tc.language, Code: "CODE"}); err != nil {
				t.Fatal(err)
			}
			if got := ts.runner.lastSpec(t).Argv; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("argv = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStreamOrder(t *testing.T) {
	ts := startServer(t, &fakeRunner{fn: func(_ context.Context, sp container.Spec) (*container.Result, error) {
		for _, w := range []struct {
			dst  io.Writer
			data string
		}{{sp.Stdout, "one\n"}, {sp.Stderr, "two\n"}, {sp.Stdout, "thr\xc3"}, {sp.Stdout, "\xa9e\n"}, {sp.Stderr, "\xff"}} {
			if _, err := w.dst.Write([]byte(w.data)); err != nil {
				return nil, err
			}
		}
		return &container.Result{ID: sp.ID, Status: container.StatusOK}, nil
	}}, nil)
	var events []agentapi.Event
	res, err := ts.client.RunStream(context.Background(), &agentapi.RunRequest{Argv: []string{"x"}}, func(ev agentapi.Event) {
		events = append(events, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []agentapi.Event{
		{Type: "start", ID: res.ID},
		{Type: "stdout", Data: "one\n"},
		{Type: "stderr", Data: "two\n"},
		{Type: "stdout", Data: "thr"},
		{Type: "stdout", Data: "\u00e9e\n"},
		{Type: "stderr", DataBase64: "/w=="},
		{Type: "result", Result: res},
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events\n got %+v\nwant %+v", events, want)
	}
}

func TestStreamSetupError(t *testing.T) {
	ts := startServer(t, &fakeRunner{fn: func(context.Context, container.Spec) (*container.Result, error) {
		return nil, errSetup
	}}, nil)
	_, err := ts.client.RunStream(context.Background(), &agentapi.RunRequest{Argv: []string{"x"}}, nil)
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Code != agentapi.CodeInternal || !strings.Contains(ae.Message, "operation not permitted") {
		t.Errorf("err = %v, want an internal agentapi.Error", err)
	}
}

// rawPost sends body to path with headers and returns status, error code,
// message and Retry-After.
func (ts *testServer) raw(t *testing.T, method, path, body string, hdr map[string]string) (int, agentapi.Error, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, "http://nsbox"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := ts.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb agentapi.ErrorBody
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error == nil {
			t.Fatalf("status %d with a non-JSON error body %q", resp.StatusCode, data)
		}
		return resp.StatusCode, *eb.Error, resp.Header
	}
	return resp.StatusCode, agentapi.Error{}, resp.Header
}

func TestErrors(t *testing.T) {
	ts := startServer(t, &fakeRunner{fn: func(_ context.Context, sp container.Spec) (*container.Result, error) {
		if sp.Argv[0] == "invalid" {
			return nil, fmt.Errorf("workspace: %w: file too big", container.ErrInvalidSpec)
		}
		if sp.Argv[0] == "setup" {
			return nil, errSetup
		}
		return &container.Result{ID: sp.ID, Status: container.StatusOK}, nil
	}}, func(c *testConfig) { c.MaxBodyBytes = 1024 })
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		hdr      map[string]string
		status   int
		code     string
		contains string
	}{
		{"malformed JSON", "POST", "/v1/runs", `{"argv": [`, nil, 400, "invalid_argument", "malformed JSON"},
		{"syntax error", "POST", "/v1/runs", `{"argv" ["x"]}`, nil, 400, "invalid_argument", "malformed JSON at byte"},
		{"empty body", "POST", "/v1/runs", ``, nil, 400, "invalid_argument", "empty request body"},
		{"trailing data", "POST", "/v1/runs", `{"argv":["x"]} {}`, nil, 400, "invalid_argument", "trailing data"},
		{"not an object", "POST", "/v1/runs", `[1]`, nil, 400, "invalid_argument", "expected"},
		{"unknown field", "POST", "/v1/runs", `{"argv":["x"],"timeout":5}`, nil, 400, "invalid_argument", "timeout: unknown field"},
		{"unknown nested field", "POST", "/v1/runs", `{"argv":["x"],"limits":{"memory":5}}`, nil, 400, "invalid_argument", "limits.memory: unknown field"},
		{"unknown field in a list", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a"},{"path":"b","txt":"x"}]}`, nil, 400, "invalid_argument", "files[1].txt: unknown field"},
		{"unknown field in env is a variable", "POST", "/v1/runs", `{"argv":["x"],"env":{"txt":"1"},"limits":{"timeoutms":1}}`, nil, 400, "invalid_argument", "limits.timeoutms: unknown field"},
		{"wrong type", "POST", "/v1/runs", `{"argv":["x"],"limits":{"pids":"many"}}`, nil, 400, "invalid_argument", "limits.pids"},
		{"no command", "POST", "/v1/runs", `{}`, nil, 400, "invalid_argument", "argv: required"},
		{"argv and code", "POST", "/v1/runs", `{"argv":["x"],"language":"python","code":"1"}`, nil, 400, "invalid_argument", "not both"},
		{"code without language", "POST", "/v1/runs", `{"code":"1"}`, nil, 400, "invalid_argument", "language: required"},
		{"bad language", "POST", "/v1/runs", `{"language":"cobol","code":"1"}`, nil, 400, "invalid_argument", "language:"},
		{"empty argv0", "POST", "/v1/runs", `{"argv":[""]}`, nil, 400, "invalid_argument", "argv[0]"},
		{"NUL in argv", "POST", "/v1/runs", `{"argv":["a","b\u0000"]}`, nil, 400, "invalid_argument", "argv[1]: contains NUL"},
		{"dotdot path", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"../etc/passwd","text":"x"}]}`, nil, 400, "invalid_argument", "files[0].path"},
		{"absolute path", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a","text":""},{"path":"/etc/passwd"}]}`, nil, 400, "invalid_argument", "files[1].path"},
		{"NUL path", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a\u0000b"}]}`, nil, 400, "invalid_argument", "files[0].path: path \"a\\x00b\" contains a NUL byte"},
		{"empty path", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":""}]}`, nil, 400, "invalid_argument", "files[0].path: empty path"},
		{"duplicate path", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a"},{"path":"a"}]}`, nil, 400, "invalid_argument", "given twice"},
		{"invalid UTF-8", "POST", "/v1/runs", "{\"argv\":[\"x\"],\"files\":[{\"path\":\"a\",\"text\":\"\xff\"}]}", nil, 400, "invalid_argument", "not valid UTF-8 at byte 43"},
		{"lone surrogate", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a","text":"x\ud800y"}]}`, nil, 400, "invalid_argument", "files[0].text: a lone UTF-16 surrogate escape at byte 44"},
		{"bad base64", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a","content_base64":"!!"}]}`, nil, 400, "invalid_argument", "files[0].content_base64"},
		{"text and base64", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a","content_base64":"AA==","text":"x"}]}`, nil, 400, "invalid_argument", "not both"},
		{"setuid mode", "POST", "/v1/runs", `{"argv":["x"],"files":[{"path":"a","mode":2541}]}`, nil, 400, "invalid_argument", "files[0].mode"},
		{"env name", "POST", "/v1/runs", `{"argv":["x"],"env":{"A=B":"1"}}`, nil, 400, "invalid_argument", "env:"},
		{"bad glob", "POST", "/v1/runs", `{"argv":["x"],"return_files":["[a"]}`, nil, 400, "invalid_argument", "return_files[0]"},
		{"limit over max", "POST", "/v1/runs", `{"argv":["x"],"limits":{"memory_bytes":1099511627776}}`, nil, 400, "invalid_argument", "limits.memory_bytes: 1099511627776 is above the daemon's maximum"},
		{"timeout over max", "POST", "/v1/runs", `{"argv":["x"],"limits":{"timeout_ms":86400000}}`, nil, 400, "invalid_argument", "limits.timeout_ms"},
		{"cpus over max", "POST", "/v1/runs", `{"argv":["x"],"limits":{"cpus":100000}}`, nil, 400, "invalid_argument", "limits.cpus"},
		{"negative limit", "POST", "/v1/runs", `{"argv":["x"],"limits":{"pids":-1}}`, nil, 400, "invalid_argument", "limits.pids: -1 is negative"},
		{"unknown rootfs", "POST", "/v1/runs", `{"argv":["x"],"rootfs":"nope"}`, nil, 400, "invalid_argument", "rootfs not found"},
		{"bad rootfs name", "POST", "/v1/runs", `{"argv":["x"],"rootfs":"../x"}`, nil, 400, "invalid_argument", "rootfs:"},
		{"engine invalid spec", "POST", "/v1/runs", `{"argv":["invalid"]}`, nil, 400, "invalid_argument", "file too big"},
		{"engine setup failure", "POST", "/v1/runs", `{"argv":["setup"]}`, nil, 500, "internal", "operation not permitted"},
		{"oversize body", "POST", "/v1/runs", `{"argv":["x"],"stdin":"` + strings.Repeat("a", 2000) + `"}`, nil, 413, "payload_too_large", "1024 bytes"},
		{"origin", "GET", "/v1/health", "", map[string]string{"Origin": "http://evil.example"}, 403, "forbidden", "Origin"},
		{"referer", "POST", "/v1/runs", `{"argv":["x"]}`, map[string]string{"Referer": "http://evil.example/"}, 403, "forbidden", "Referer"},
		{"media type", "POST", "/v1/runs", `{"argv":["x"]}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "text/plain"},
		{"not found", "GET", "/v1/nope", "", nil, 404, "not_found", "/v1/nope"},
		{"old version", "POST", "/v0/runs", "{}", nil, 404, "not_found", "no such endpoint"},
		{"method", "GET", "/v1/runs", "", nil, 405, "method_not_allowed", "use POST"},
	}
	t.Cleanup(func() {
		// Operators see why a request was refused, not only its status.
		if !strings.Contains(ts.logs.String(), `"status":400,`) || !strings.Contains(ts.logs.String(), `"code":"invalid_argument","error":"argv: required`) {
			t.Errorf("the log lines of refused requests lack their code and reason:\n%s", ts.logs)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, ae, _ := ts.raw(t, tc.method, tc.path, tc.body, tc.hdr)
			if status != tc.status || ae.Code != tc.code || !strings.Contains(ae.Message, tc.contains) {
				t.Errorf("got %d %s %q, want %d %s containing %q", status, ae.Code, ae.Message, tc.status, tc.code, tc.contains)
			}
		})
	}
}

func TestHealthInfoMetrics(t *testing.T) {
	ts := startServer(t, nil, func(c *testConfig) { c.MaxConcurrent, c.QueueSize = 3, 5 })
	ctx := context.Background()
	h, err := ts.client.Health(ctx)
	if err != nil || h.Status != "ok" || h.APIVersion != "v1" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	in, err := ts.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.MaxConcurrent != 3 || in.QueueSize != 5 || in.Version != "test" || in.CgroupMode != "v2" || len(in.Rootfs) != 2 ||
		in.DefaultRootfs != "default" || in.DefaultLimits.MemoryBytes != 512<<20 || in.MaxLimits.MemoryBytes != 8<<30 {
		t.Errorf("info = %+v", in)
	}
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := ts.http.Get("http://nsbox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`nsbox_runs_total{status="ok"} 1`, "nsbox_run_queue_wait_seconds_count 1",
		"nsbox_run_duration_seconds_count 1", "nsbox_runs_in_flight 0", "nsbox_run_queue_depth 0", "nsbox_spawn_failures_total 0",
		`nsbox_build_info{go_version="` + runtime.Version() + `",version="test"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestAdmission429(t *testing.T) {
	runner, started, release := blockingRunner()
	ts := startServer(t, runner, func(c *testConfig) { c.MaxConcurrent, c.QueueSize = 1, 1 })
	ctx := context.Background()
	results := make(chan error, 2)
	go func() { _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"a"}}); results <- err }()
	<-started
	go func() { _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"b"}}); results <- err }()
	for queued(ts) != 1 {
		time.Sleep(time.Millisecond)
	}
	status, ae, hdr := ts.raw(t, "POST", "/v1/runs", `{"argv":["c"]}`, nil)
	if status != http.StatusTooManyRequests || ae.Code != agentapi.CodeResourceExhausted || hdr.Get("Retry-After") == "" {
		t.Errorf("third run: %d %+v Retry-After=%q, want 429 with Retry-After", status, ae, hdr.Get("Retry-After"))
	}
	_, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"d"}})
	var cae *agentapi.Error
	if !errors.As(err, &cae) || cae.Status != 429 || cae.RetryAfter != time.Second {
		t.Errorf("client error = %#v, want a 429 *agentapi.Error with RetryAfter 1s", err)
	}
	close(release)
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("admitted run: %v", err)
		}
	}
}

func TestClientDisconnectCancelsRun(t *testing.T) {
	cancelled := make(chan struct{})
	runner := &fakeRunner{fn: func(ctx context.Context, sp container.Spec) (*container.Result, error) {
		_, _ = sp.Stdout.Write([]byte("tick\n"))
		<-ctx.Done()
		close(cancelled)
		return &container.Result{ID: sp.ID, Status: container.StatusKilled}, nil
	}}
	ts := startServer(t, runner, nil)
	tests := []struct {
		name   string
		stream bool
	}{{"stream", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			_, err := ts.client.RunStream(ctx, &agentapi.RunRequest{Argv: []string{"x"}}, func(ev agentapi.Event) {
				if ev.Type == agentapi.EventStdout {
					cancel()
				}
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("RunStream = %v, want context.Canceled", err)
			}
			<-cancelled // the run's ctx was cancelled by the disconnect
		})
	}
}

func TestClientDisconnectCancelsPlainRun(t *testing.T) {
	runner, started, _ := blockingRunner()
	ts := startServer(t, runner, nil)
	done := make(chan struct{})
	runner.fn = func(ctx context.Context, sp container.Spec) (*container.Result, error) {
		started <- sp.ID
		<-ctx.Done()
		close(done)
		return &container.Result{ID: sp.ID, Status: container.StatusKilled}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := ts.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"x"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	<-done
}

func TestShutdownDrains(t *testing.T) {
	runner, started, release := blockingRunner()
	ts := startServer(t, runner, nil)
	res := make(chan *agentapi.RunResult, 1)
	go func() {
		r, err := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"x"}})
		if err != nil {
			t.Errorf("draining run: %v", err)
		}
		res <- r
	}()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop() }()
	// Once the listener is closed, no new connection gets in.
	for {
		c, err := net.Dial("unix", ts.sock)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(time.Millisecond)
	}
	// A request on a connection that was already open is answered 503.
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest("GET", "/v1/health", nil)
	ts.srv.Handler().ServeHTTP(rec, req)
	if rec.status != http.StatusServiceUnavailable || rec.header.Get("Retry-After") == "" ||
		!strings.Contains(rec.body.String(), `"code":"unavailable"`) {
		t.Errorf("during drain: %d %s, want 503 unavailable with Retry-After", rec.status, rec.body.String())
	}
	close(release)
	if r := <-res; r == nil || r.Status != agentapi.StatusOK {
		t.Errorf("the run in flight did not finish normally: %+v", r)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestShutdownGraceCancelsRuns(t *testing.T) {
	runner, started, _ := blockingRunner()
	ts := startServer(t, runner, func(c *testConfig) { c.ShutdownGrace = 10 * time.Millisecond })
	res := make(chan *agentapi.RunResult, 1)
	go func() {
		r, _ := ts.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"x"}})
		res <- r
	}()
	<-started
	if err := ts.stop(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if r := <-res; r != nil && r.Status != agentapi.StatusKilled {
		t.Errorf("run after the grace period: %+v, want killed (or a dropped connection)", r)
	}
}

type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(s int)           { r.status = s }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
