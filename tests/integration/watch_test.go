package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// watchStream is an open GET /v1/sessions/{id}/watch.
type watchStream struct {
	t      *testing.T
	sc     *bufio.Scanner
	cancel context.CancelFunc
}

// openWatch opens a watch and returns it once its start line came, or
// the error answer's status.
func openWatch(t *testing.T, d *daemon, id, query string) (*watchStream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://nsbox/v1/sessions/"+id+"/watch?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	w := &watchStream{t: t, sc: bufio.NewScanner(resp.Body), cancel: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(w.cancel)
	if e := w.next(); e.Type != agentapi.WatchStart {
		t.Fatalf("first line %+v, want start", e)
	}
	return w, http.StatusOK
}

func (w *watchStream) next() agentapi.WatchEvent {
	w.t.Helper()
	if !w.sc.Scan() {
		w.t.Fatalf("the watch ended: %v", w.sc.Err())
	}
	var e agentapi.WatchEvent
	if err := json.Unmarshal(w.sc.Bytes(), &e); err != nil {
		w.t.Fatalf("line %q: %v", w.sc.Text(), err)
	}
	return e
}

// until reads lines up to one of type typ and name name (included).
func (w *watchStream) until(typ, name string) []agentapi.WatchEvent {
	w.t.Helper()
	var got []agentapi.WatchEvent
	for {
		e := w.next()
		got = append(got, e)
		if e.Type == typ && e.Name == name {
			return got
		}
	}
}

// TestSessionWatch: GET /v1/sessions/{id}/watch streams a workspace
// directory's changes as the session's code makes them, in order;
// recursive reaches a directory made after it started; 10,000 files made
// in a row come as 10,000 lines, none lost; a path out of the workspace
// is 400, a symlink to a host directory leads nowhere (404: the watch is
// the sandbox's); a session without a process agent is refused; watches
// the client left are gone from the sandbox (the agent holds at most 16:
// three rounds of 16 open and close).
func TestSessionWatch(t *testing.T) {
	d := startDaemon(t)
	plain := newSession(t, d, &agentapi.SessionRequest{})
	if _, code := openWatch(t, d, plain, ""); code != http.StatusBadRequest {
		t.Errorf("a watch of a session without processes: %d, want 400", code)
	}
	id := newSession(t, d, &agentapi.SessionRequest{Processes: true})
	execOK(t, d, id, "import os\nos.makedirs('w/sub')\nos.makedirs('many')")

	w, _ := openWatch(t, d, id, "path=w")
	execOK(t, d, id, "import os\nopen('w/sub/x','w').close()\nopen('w/a','w').close()\nopen('w/a','a').write('x')\nos.rename('w/a','w/b')\nos.remove('w/b')\nopen('w/end','w').close()")
	got := w.until(agentapi.WatchCreate, "end")
	want := []agentapi.WatchEvent{
		{Type: "create", Name: "a"}, {Type: "write", Name: "a"}, {Type: "rename", Name: "a"},
		{Type: "create", Name: "b"}, {Type: "remove", Name: "b"}, {Type: "create", Name: "end"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
	w.cancel()

	r, _ := openWatch(t, d, id, "path=w&recursive=1")
	execOK(t, d, id, "import os\nos.makedirs('w/new')")
	r.until(agentapi.WatchCreate, "new")
	execOK(t, d, id, "open('w/new/f','w').write('x')")
	if got := r.until(agentapi.WatchWrite, "new/f"); fmt.Sprint(got) != fmt.Sprint([]agentapi.WatchEvent{{Type: "create", Name: "new/f"}, {Type: "write", Name: "new/f"}}) {
		t.Errorf("recursive: %v", got)
	}
	r.cancel()

	m, _ := openWatch(t, d, id, "path=many")
	execOK(t, d, id, "for i in range(10000):\n    open(f'many/f{i}','w').close()\nopen('many/end','w').close()")
	got = m.until(agentapi.WatchCreate, "end")
	if len(got) != 10001 {
		t.Fatalf("%d lines for 10,001 files", len(got))
	}
	for i, e := range got[:10000] {
		if e.Type != agentapi.WatchCreate || e.Name != fmt.Sprint("f", i) {
			t.Fatalf("line %d: %+v, want create f%d", i, e, i)
		}
	}
	m.cancel()

	host := t.TempDir()
	execOK(t, d, id, fmt.Sprintf("import os\nos.symlink(%q, 'tohost')", host))
	for q, want := range map[string]int{"path=../etc": 400, "path=/etc": 400, "path=tohost": 404, "path=missing": 404, "recursive=maybe": 400} {
		if _, code := openWatch(t, d, id, q); code != want {
			t.Errorf("watch ?%s: %d, want %d", q, code, want)
		}
	}

	for round := range 3 {
		var open []*watchStream
		deadline := time.Now().Add(time.Minute)
		for len(open) < 16 {
			s, code := openWatch(t, d, id, "path=w")
			switch {
			case code == http.StatusOK:
				open = append(open, s)
			case code == http.StatusTooManyRequests && round > 0 && time.Now().Before(deadline):
				// the last round's watches are being closed
			default:
				t.Fatalf("round %d, watch %d: %d", round, len(open), code)
			}
		}
		for _, s := range open {
			s.cancel()
		}
	}
}

// TestSessionWatchEnds: through the Go client, a watch whose directory is
// removed ends cleanly after its remove of "."; one whose session is
// deleted ends with the session's error.
func TestSessionWatchEnds(t *testing.T) {
	d := startDaemon(t)
	id := newSession(t, d, &agentapi.SessionRequest{Processes: true})
	execOK(t, d, id, "import os\nos.makedirs('gone')\nos.makedirs('stays')")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	started := make(chan struct{})
	var got []agentapi.WatchEvent
	done := make(chan error, 1)
	go func() {
		done <- d.client.Watch(ctx, id, "gone", false, func(e agentapi.WatchEvent) {
			if e.Type == agentapi.WatchStart {
				close(started)
				return
			}
			got = append(got, e)
		})
	}()
	<-started
	execOK(t, d, id, "import os\nos.rmdir('gone')")
	if err := <-done; err != nil || fmt.Sprint(got) != fmt.Sprint([]agentapi.WatchEvent{{Type: "remove", Name: "."}, {Type: "end"}}) {
		t.Errorf("a watch of a removed directory: %v, events %v", err, got)
	}

	started = make(chan struct{})
	go func() {
		done <- d.client.Watch(ctx, id, "stays", true, func(e agentapi.WatchEvent) {
			if e.Type == agentapi.WatchStart {
				close(started)
			}
		})
	}()
	<-started
	if err := d.client.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || ctx.Err() != nil {
		t.Errorf("a watch of a deleted session ended with %v, want the session's error", err)
	} else {
		t.Logf("a watch of a deleted session: %v", err)
	}
}

// TestSessionWatchCLI: nsbox session watch prints a session directory's
// changes, one "TYPE NAME" line each, and exits 0 once the directory is
// gone; session create --processes makes the session it needs.
func TestSessionWatchCLI(t *testing.T) {
	d := startDaemon(t)
	out, errOut, code := runCLI(t, "", "session", "create", "--processes", "--socket", d.sock)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("session create --processes: exit %d, %q %q", code, out, errOut)
	}
	execOK(t, d, id, "import os\nos.makedirs('d')")
	cmd := execNsbox("session", "watch", id, "d", "--socket", d.sock)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() || sc.Text() != "watching /workspace/d" {
		t.Fatalf("first line on stderr %q (%v)", sc.Text(), sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	execOK(t, d, id, "import os\nopen('d/f','w').close()\nos.remove('d/f')\nos.rmdir('d')")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("session watch: %v (stdout %q)", err, stdout.String())
	}
	if want := "create f\nremove f\nremove .\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestSessionWatchAtShutdown: an open watch does not hold up the
// daemon's stop for its grace period (a watch has nothing to finish): its
// stream ends at once with an error line saying the daemon is shutting
// down, and the daemon leaves nothing behind.
func TestSessionWatchAtShutdown(t *testing.T) {
	d := startDaemon(t)
	id := newSession(t, d, &agentapi.SessionRequest{Processes: true})
	w, _ := openWatch(t, d, id, "recursive=1")
	last := make(chan agentapi.WatchEvent, 1)
	go func() {
		var e agentapi.WatchEvent
		for w.sc.Scan() {
			_ = json.Unmarshal(w.sc.Bytes(), &e)
		}
		last <- e
	}()
	if err := d.signal(t, 15); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	if e := <-last; e.Type != agentapi.WatchError || e.Error == nil || e.Error.Code != agentapi.CodeUnavailable {
		t.Errorf("the watch's last line %+v, want an error saying the daemon is shutting down", e)
	}
	d.assertClean(t, id)
}
