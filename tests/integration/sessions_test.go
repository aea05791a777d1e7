package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/tests/internal/testdaemon"
)

// dataSciRootfs returns the name of the data-science rootfs (pandas,
// matplotlib) in the test store, or skips.
func dataSciRootfs(t *testing.T) string {
	t.Helper()
	return testdaemon.DataSciRootfs(t)
}

func newSession(t *testing.T, d *daemon, req *agentapi.SessionRequest) string {
	t.Helper()
	s, err := d.client.CreateSession(context.Background(), req)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if s.ID == "" || s.State != agentapi.SessionIdle {
		t.Fatalf("session %+v", s)
	}
	return s.ID
}

func execOK(t *testing.T, d *daemon, id, code string) *agentapi.RunResult {
	t.Helper()
	res, err := d.client.Exec(context.Background(), id, &agentapi.ExecRequest{Code: code})
	if err != nil {
		t.Fatalf("Exec(%q): %v", code, err)
	}
	if res.Status != agentapi.StatusOK {
		t.Fatalf("Exec(%q): status %s exception %+v stderr %s", code, res.Status, res.Exception, res.Stderr)
	}
	return res
}

func TestSessionStateExceptionTimeout(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, id, "x = 41")
	if res := execOK(t, d, id, "x + 1"); res.Value != "42" || res.ExecutionCount != 2 {
		t.Fatalf("x + 1: %+v", res)
	}

	res, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "def f():\n    return 1 / 0\n\nf()"})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Exception
	if res.Status != agentapi.StatusException || e == nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" ||
		!strings.Contains(e.Traceback, `File "<cell 3>", line 4`) || !strings.Contains(e.Traceback, `File "<cell 3>", line 2, in f`) ||
		!strings.Contains(e.Traceback, "return 1 / 0") {
		t.Fatalf("exception result %+v %+v", res, e)
	}

	// 2 s: an interrupt that came before the cell started (a busy machine
	// slow to hand it over) would be ignored and the session killed.
	res, err = d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "while True: pass", TimeoutMs: 2000})
	if err != nil || res.Status != agentapi.StatusTimeout || res.SessionDead {
		t.Fatalf("timeout exec: %+v %v", res, err)
	}
	if res := execOK(t, d, id, "x"); res.Value != "41" {
		t.Fatalf("x after the timeout: %q", res.Value)
	}

	// Streaming: chunks then the result, the marker never shows.
	var streamed strings.Builder
	res, err = d.client.ExecStream(ctx, id, &agentapi.ExecRequest{Code: "for i in range(3): print(i, flush=True)"}, func(ev agentapi.Event) {
		if ev.Type == agentapi.EventStdout {
			streamed.WriteString(ev.Data)
		}
	})
	if err != nil || res.Status != agentapi.StatusOK || streamed.String() != "0\n1\n2\n" || res.Stdout != "0\n1\n2\n" {
		t.Fatalf("stream: %q, %+v, %v", streamed.String(), res, err)
	}
	if err := d.client.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	var ae *agentapi.Error
	if _, err := d.client.Session(ctx, id); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %v", err)
	}
	d.assertClean(t, id)
}

func TestSessionFilesCSV(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{Files: []agentapi.File{{Path: "README", Text: "hi"}}})
	csv := "city,temp\nParis,21\nOslo,9\nRome,27\n"
	if err := d.client.PutFile(ctx, id, "data/temps.csv", strings.NewReader(csv)); err != nil {
		t.Fatal(err)
	}
	res := execOK(t, d, id, `import csv
rows = list(csv.DictReader(open('data/temps.csv')))
with open('data/hot.csv', 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['city', 'temp'])
    w.writerows([r['city'], r['temp']] for r in rows if int(r['temp']) > 20)
len(rows)`)
	if res.Value != "3" || len(res.Files) != 1 || res.Files[0].Path != "data/hot.csv" || res.Files[0].Mime != "text/csv; charset=utf-8" {
		t.Fatalf("exec: value %q files %+v", res.Value, res.Files)
	}
	got, err := d.client.GetFile(ctx, id, "data/hot.csv")
	if err != nil || string(got) != "city,temp\r\nParis,21\r\nRome,27\r\n" {
		t.Fatalf("hot.csv = %q, %v", got, err)
	}
	files, err := d.client.ListFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]agentapi.WorkspaceFile{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	if f := byPath["data/temps.csv"]; f.Size != int64(len(csv)) || len(f.SHA256) != 64 || f.ModTime.IsZero() || !byPath["data"].Dir {
		t.Fatalf("list: %+v", files)
	}
	if err := d.client.DeleteFile(ctx, id, "data/temps.csv"); err != nil {
		t.Fatal(err)
	}
	var ae *agentapi.Error
	if _, err := d.client.GetFile(ctx, id, "data/temps.csv"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("GET deleted file: %v", err)
	}

	// A planted symlink is never followed by the daemon.
	execOK(t, d, id, "import os\nos.symlink('/etc/passwd', 'pw')\nos.symlink('/etc', 'etcdir')")
	for _, p := range []string{"pw", "etcdir/passwd"} {
		if data, err := d.client.GetFile(ctx, id, p); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("GET %s through a symlink: %q, %v", p, data, err)
		}
	}
	if err := d.client.PutFile(ctx, id, "etcdir/evil", strings.NewReader("x")); err == nil {
		t.Error("PUT through a symlinked directory succeeded")
	}
	// Paths escaping the workspace are refused.
	for _, p := range []string{"../x", "a/../../x"} {
		req, _ := http.NewRequest(http.MethodGet, "http://nsbox/v1/sessions/"+id+"/files/"+p, nil)
		req.URL.RawPath = "/v1/sessions/" + id + "/files/" + p
		resp, err := d.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s: 200", p)
		}
	}
}

func TestSessionsIsolated(t *testing.T) {
	d := startDaemon(t)
	a := newSession(t, d, &agentapi.SessionRequest{})
	b := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, a, "secret = 1\nopen('a.txt', 'w').write('a')")
	if res := execOK(t, d, b, "import os\n('secret' in globals(), os.listdir('.'))"); res.Value != "(False, [])" {
		t.Fatalf("session b sees %s", res.Value)
	}
	list, err := d.client.Sessions(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("list %+v %v", list, err)
	}
}

func TestSessionOOMIsDead(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{Limits: &agentapi.Limits{MemoryBytes: 64 << 20}})
	res, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "b = bytearray(1 << 30)"})
	if err != nil || res.Status != agentapi.StatusOOM || !res.SessionDead {
		t.Fatalf("oom exec: %+v %v", res, err)
	}
	s, err := d.client.Session(ctx, id)
	if err != nil || s.State != agentapi.SessionDead || s.DeadStatus != agentapi.StatusOOM || !strings.Contains(s.DeadReason, "memory") {
		t.Fatalf("GET after OOM: %+v %v", s, err)
	}
	var ae *agentapi.Error
	if _, err := d.client.Exec(ctx, id, &agentapi.ExecRequest{Code: "1"}); !errors.As(err, &ae) || ae.Code != agentapi.CodeSessionDead {
		t.Fatalf("exec on a dead session: %v", err)
	}
	d.assertClean(t, id)
}

func TestSessionExpiresAndMax(t *testing.T) {
	d := startDaemon(t, "--max-sessions", "1")
	ctx := context.Background()
	// Idle long enough to still hold the one slot at the second create on
	// a busy machine; then it expires by itself.
	id := newSession(t, d, &agentapi.SessionRequest{IdleTimeoutMs: 3000})
	var ae *agentapi.Error
	if _, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{}); !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Fatalf("second session with --max-sessions 1: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := d.client.Session(ctx, id)
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session did not expire: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.assertClean(t, id)
	// The slot is free again.
	newSession(t, d, &agentapi.SessionRequest{})
}

func TestSessionsEndOnShutdown(t *testing.T) {
	d := startDaemon(t)
	id := newSession(t, d, &agentapi.SessionRequest{})
	execOK(t, d, id, "x = 1")
	if err := d.signal(t, 15); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	d.assertClean(t, id)
}

func TestRunPythonRich(t *testing.T) {
	d := startDaemon(t)
	res, err := d.client.Run(context.Background(), &agentapi.RunRequest{Language: "python", Code: "x = 6\nx * 7"})
	if err != nil || res.Status != agentapi.StatusOK || res.Value != "42" {
		t.Fatalf("run: %+v %v", res, err)
	}
	res, err = d.client.Run(context.Background(), &agentapi.RunRequest{Language: "python", Code: "print('a')\n1/0"})
	if err != nil || res.Status != agentapi.StatusException || res.Exception == nil || res.Exception.Name != "ZeroDivisionError" || res.Stdout != "a\n" || res.ExitCode != 1 {
		t.Fatalf("run: %+v %v", res, err)
	}
}

func TestSessionDataScience(t *testing.T) {
	name := dataSciRootfs(t)
	d := startDaemon(t)
	ctx := context.Background()
	id := newSession(t, d, &agentapi.SessionRequest{Rootfs: name, Limits: &agentapi.Limits{MemoryBytes: 1 << 30}})
	execOK(t, d, id, "import pandas as pd\nimport matplotlib.pyplot as plt")
	if err := d.client.PutFile(ctx, id, "t.csv", strings.NewReader("city,temp\nParis,21\nOslo,9\nRome,27\n")); err != nil {
		t.Fatal(err)
	}
	res := execOK(t, d, id, "df = pd.read_csv('t.csv')\ndf[df.temp > 20].to_csv('hot.csv', index=False)\nfloat(df.temp.mean())")
	if res.Value != "19.0" {
		t.Fatalf("mean %q", res.Value)
	}
	if got, err := d.client.GetFile(ctx, id, "hot.csv"); err != nil || string(got) != "city,temp\nParis,21\nRome,27\n" {
		t.Fatalf("hot.csv %q %v", got, err)
	}
	for _, tc := range []struct {
		code string
		n    int
	}{
		{"plt.plot([1, 2, 3])", 1},
		{"df.plot(x='city', y='temp')\nplt.figure(); plt.bar([1], [2]); plt.show()", 2},
	} {
		res := execOK(t, d, id, tc.code)
		if len(res.Figures) != tc.n {
			t.Fatalf("%q: %d figures, want %d", tc.code, len(res.Figures), tc.n)
		}
		for _, f := range res.Figures {
			b, err := base64.StdEncoding.DecodeString(f.DataBase64)
			if err != nil || f.Mime != "image/png" {
				t.Fatalf("figure %s: %v", f.Mime, err)
			}
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Fatalf("figure is not a PNG: %v", err)
			}
		}
	}
}

// TestPythonExitCodesMatchArgv: a Python run and a session exec report the
// exit code and signal the same code gives as an argv run.
func TestPythonExitCodesMatchArgv(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	sess, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, code string
		timeoutMs  int64
	}{
		{"raises", "1/0", 0},
		{"ends", "print(1)", 0},
		{"times out", "while True: pass", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := &agentapi.Limits{TimeoutMs: tc.timeoutMs}
			argv, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"python3", "-c", tc.code}, Limits: lim})
			if err != nil {
				t.Fatal(err)
			}
			py, err := d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Code: tc.code, Limits: lim})
			if err != nil {
				t.Fatal(err)
			}
			ex, err := d.client.Exec(ctx, sess.ID, &agentapi.ExecRequest{Code: tc.code, TimeoutMs: tc.timeoutMs})
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []*agentapi.RunResult{py, ex} {
				if got.ExitCode != argv.ExitCode || got.Signal != argv.Signal {
					t.Errorf("%s: exit %d %q, argv run: exit %d %q", got.Status, got.ExitCode, got.Signal, argv.ExitCode, argv.Signal)
				}
			}
		})
	}
}

// Listings past 10,000 entries say they were cut: a run's and an exec's
// changed files (files_truncated) and the session's file list (the field
// and the X-Nsbox-Truncated header).
func TestListingsSayWhenCut(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	touch := "for i in range(10001): open('f%05d' % i, 'w').close()"
	// 10,001 files take seconds under emulation and load: the runs get
	// the largest timeout, so that only a hang ends them.
	long := &agentapi.Limits{TimeoutMs: 600_000}
	run, err := d.client.Run(ctx, &agentapi.RunRequest{Language: "python", Code: touch, Limits: long})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != agentapi.StatusOK || !run.FilesTruncated || len(run.Files) != 10000 {
		t.Errorf("run: %s, files_truncated %v with %d files", run.Status, run.FilesTruncated, len(run.Files))
	}
	id := newSession(t, d, &agentapi.SessionRequest{Limits: long})
	if res := execOK(t, d, id, touch); !res.FilesTruncated {
		t.Errorf("exec: files_truncated not set with %d files", len(res.Files))
	}
	resp, err := d.http.Get("http://nsbox/v1/sessions/" + id + "/files")
	if err != nil {
		t.Fatal(err)
	}
	var list agentapi.FileList
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || !list.FilesTruncated || len(list.Files) != 10000 || resp.Header.Get(agentapi.HeaderTruncated) != "true" {
		t.Errorf("file list: %v; files_truncated %v, %d files, header %q", err, list.FilesTruncated, len(list.Files), resp.Header.Get(agentapi.HeaderTruncated))
	}
}

// TestSessionInit: a session with "init" runs its runner as pid 1's
// child, which reaps the orphans of the code's children and forwards the
// SIGINT that interrupts a cell; its forks keep it. Without it the runner
// is pid 1.
func TestSessionInit(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	const pid1 = "import os; os.getpid() == 1"
	plain, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res := execOK(t, d, plain.ID, pid1); res.Value != "True" {
		t.Errorf("without init the runner is not pid 1: %q", res.Value)
	}
	s, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{Init: true})
	if err != nil {
		t.Fatal(err)
	}
	if res := execOK(t, d, s.ID, pid1); res.Value != "False" {
		t.Errorf("with init the runner is pid 1: %q", res.Value)
	}
	orphan := `
import os, time
r, w = os.pipe()
if os.fork() == 0:
    g = os.fork()
    if g == 0:
        os._exit(0)
    os.write(w, b'%d' % g); os._exit(0)
g = int(os.read(r, 32))
while os.path.exists('/proc/%d' % g):
    time.sleep(0.01)
print('reaped')
`
	if res := execOK(t, d, s.ID, orphan); res.Stdout != "reaped\n" {
		t.Errorf("orphan: stdout %q", res.Stdout)
	}
	// A cell's timeout interrupts it with a SIGINT to the sandbox's pid 1,
	// which forwards it: the session lives on.
	res, err := d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "while True: pass", TimeoutMs: 2000}) // 2 s: after the cell started, on a busy machine too
	if err != nil || res.Status != agentapi.StatusTimeout || res.SessionDead {
		t.Fatalf("timeout exec: %+v %v", res, err)
	}
	execOK(t, d, s.ID, "1")
	f, err := d.client.ForkSession(ctx, s.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res := execOK(t, d, f.Sessions[0].ID, pid1); res.Value != "False" {
		t.Errorf("the fork of a session with init has none: %q", res.Value)
	}
}
