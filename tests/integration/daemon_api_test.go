package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/sandboxinit"
)

func TestDaemonHappyPath(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	res, err := d.client.Run(ctx, &agentapi.RunRequest{
		Language:    "python",
		Code:        "import sys\nprint(open('in.txt').read() + sys.stdin.read())\nopen('out.txt', 'w').write('made')",
		Stdin:       " world",
		Files:       []agentapi.File{{Path: "in.txt", Text: "hello"}},
		ReturnFiles: []string{"out.txt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOK || res.ExitCode != 0 || res.Stdout != "hello world\n" || res.ID == "" {
		t.Fatalf("result = %+v", res)
	}
	var out *agentapi.FileResult
	for i := range res.Files {
		if res.Files[i].Path == "out.txt" {
			out = &res.Files[i]
		}
	}
	if out == nil || out.ContentBase64 != "bWFkZQ==" || out.Size != 4 {
		t.Errorf("files = %+v, want out.txt inline", res.Files)
	}

	res, err = d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"sh", "-c", "echo oops >&2; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusExitNonzero || res.ExitCode != 7 || res.Stderr != "oops\n" {
		t.Errorf("result = %+v", res)
	}
	info, err := d.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.APIVersion != "v1" || info.CgroupMode == "" || len(info.Rootfs) == 0 {
		t.Errorf("info = %+v", info)
	}
	if abi := sandboxinit.LandlockABI(); info.Landlock != (agentapi.Landlock{Mode: "auto", ABI: abi, Active: abi > 0}) {
		t.Errorf("info.landlock = %+v, want auto with ABI %d", info.Landlock, abi)
	}
	d.assertClean(t, res.ID)
}

func TestDaemonErrors(t *testing.T) {
	d := startDaemon(t)
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		code, contains           string
	}{
		{"malformed", "POST", "/v1/runs", `{"argv":`, nil, 400, "invalid_argument", "malformed JSON"},
		{"unknown field", "POST", "/v1/runs", `{"argv":["true"],"bogus":1}`, nil, 400, "invalid_argument", "bogus"},
		{"bad path", "POST", "/v1/runs", `{"argv":["true"],"files":[{"path":"../x"}]}`, nil, 400, "invalid_argument", "files[0].path"},
		{"limit over max", "POST", "/v1/runs", `{"argv":["true"],"limits":{"pids":1000000000}}`, nil, 400, "invalid_argument", "limits.pids"},
		{"unknown rootfs", "POST", "/v1/runs", `{"argv":["true"],"rootfs":"no-such-rootfs"}`, nil, 400, "invalid_argument", "not found"},
		{"oversize", "POST", "/v1/runs", `{"argv":["true"],"stdin":"` + strings.Repeat("x", 65<<20) + `"}`, nil, 413, "payload_too_large", "bytes"},
		{"origin", "POST", "/v1/runs", `{"argv":["true"]}`, map[string]string{"Origin": "http://x"}, 403, "forbidden", "Origin"},
		{"not found", "GET", "/v1/nothing", "", nil, 404, "not_found", "no such endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://nsbox"+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := d.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) || !strings.Contains(string(body), tc.contains) {
				t.Errorf("got %d %s, want %d %s containing %q", resp.StatusCode, body, tc.status, tc.code, tc.contains)
			}
		})
	}
}

func TestDaemonStreamOrder(t *testing.T) {
	d := startDaemon(t)
	// stdout and stderr are two pipes: their order is the order the
	// daemon read them in, which 0.2 s between writes keeps on a busy
	// machine (it was 0.05 s).
	code := `import sys, time
for i in range(3):
    print("out%d" % i, flush=True)
    time.sleep(0.2)
    print("err%d" % i, file=sys.stderr, flush=True)
    time.sleep(0.2)
`
	var got []string
	res, err := d.client.RunStream(context.Background(), &agentapi.RunRequest{Language: "python", Code: code}, func(ev agentapi.Event) {
		switch ev.Type {
		case agentapi.EventStdout, agentapi.EventStderr:
			// Chunk boundaries are not part of the contract: merge a
			// stream's consecutive chunks.
			if n := len(got); n > 0 && strings.HasPrefix(got[n-1], ev.Type+":") {
				got[n-1] += ev.Data
				return
			}
			got = append(got, ev.Type+":"+ev.Data)
		default:
			got = append(got, ev.Type)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "stdout:out0\n", "stderr:err0\n", "stdout:out1\n", "stderr:err1\n", "stdout:out2\n", "stderr:err2\n", "result"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if res.Status != agentapi.StatusOK || res.Stdout != "out0\nout1\nout2\n" {
		t.Errorf("result = %+v", res)
	}
}

func TestDaemonConcurrentAdmission(t *testing.T) {
	d := startDaemon(t, "--max-concurrent", "4", "--queue", "8")
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, busy int
		ids      []string
	)
	for i := range n {
		wg.Go(func() {
			res, err := d.client.Run(context.Background(), &agentapi.RunRequest{Language: "python", Code: fmt.Sprintf("print(%d)", i)})
			mu.Lock()
			defer mu.Unlock()
			var ae *agentapi.Error
			switch {
			case err == nil && res.Status == agentapi.StatusOK && res.Stdout == fmt.Sprintf("%d\n", i):
				ok++
				ids = append(ids, res.ID)
			case errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests && ae.RetryAfter > 0:
				busy++
			default:
				t.Errorf("run %d: %+v, %v", i, res, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d ok, %d refused with 429", ok, busy)
	if ok+busy != n || ok < 12 {
		t.Errorf("%d ok + %d busy, want %d in all and at least the 12 slots+queue admitted", ok, busy, n)
	}
	d.assertClean(t, ids...)
}

// sleeper is a run that prints "ready" and sleeps; marker tags its argv.
func sleeper(marker string) *agentapi.RunRequest {
	// Python code reaches the runner over its control socket: the marker
	// is in the environment, where processesWith looks too.
	return &agentapi.RunRequest{Language: "python", Code: "import time\nprint('ready', flush=True)\ntime.sleep(600)  # " + marker,
		Env: map[string]string{"NSBOX_IT_MARKER": marker}}
}

// startSleeper streams sleeper(marker) until it prints "ready", then returns
// the run id and a func that ends the client side.
func startSleeper(t *testing.T, d *daemon, marker string) (id string, cancel func(), done chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done = make(chan error, 1)
	go func() {
		var runID string
		_, err := d.client.RunStream(ctx, sleeper(marker), func(ev agentapi.Event) {
			if ev.Type == agentapi.EventStart {
				runID = ev.ID
			}
			if ev.Type == agentapi.EventStdout && strings.Contains(ev.Data, "ready") {
				ready <- runID
			}
		})
		done <- err
	}()
	select {
	case id = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("sleeper ended before it was ready: %v", err)
	}
	if len(processesWith(marker)) == 0 {
		t.Fatalf("no process with marker %q while the run is live", marker)
	}
	return id, cancel, done
}

func TestDaemonClientDisconnectKillsRun(t *testing.T) {
	d := startDaemon(t)
	marker := randomName("nsbox-it-marker-")
	id, cancel, done := startSleeper(t, d, marker)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunStream after cancel = %v", err)
	}
	waitGone(t, marker)
	// The daemon still serves, and the run left nothing behind.
	d.waitIdle(t)
	d.assertClean(t, id)
}

func TestDaemonSIGTERMDrains(t *testing.T) {
	d := startDaemon(t, "--shutdown-grace", "2m")
	type outcome struct {
		res *agentapi.RunResult
		err error
	}
	started := make(chan struct{})
	out := make(chan outcome, 1)
	go func() {
		res, err := d.client.RunStream(context.Background(), &agentapi.RunRequest{Language: "python",
			Code: "import time\nprint('ready', flush=True)\ntime.sleep(1)\nprint('done')"}, func(ev agentapi.Event) {
			if ev.Type == agentapi.EventStdout && strings.Contains(ev.Data, "ready") {
				close(started)
			}
		})
		out <- outcome{res, err}
	}()
	<-started
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v, want status 0", err)
	}
	o := <-out
	if o.err != nil || o.res.Status != agentapi.StatusOK || !strings.Contains(o.res.Stdout, "done") {
		t.Errorf("run in flight at SIGTERM: %+v, %v; want it to finish", o.res, o.err)
	}
	if _, err := os.Stat(d.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after shutdown: %v, want it removed", err)
	}
	d.assertClean(t, o.res.ID)
}

func TestDaemonSIGTERMGraceKillsRuns(t *testing.T) {
	d := startDaemon(t, "--shutdown-grace", "100ms")
	marker := randomName("nsbox-it-marker-")
	id, cancel, done := startSleeper(t, d, marker)
	defer cancel()
	if err := d.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v, want status 0", err)
	}
	<-done
	waitGone(t, marker)
	d.assertClean(t, id) // the daemon has exited: every run was torn down
}

func TestDaemonSIGKILLRecovery(t *testing.T) {
	d := startDaemon(t)
	marker := randomName("nsbox-it-marker-")
	id, cancel, _ := startSleeper(t, d, marker)
	defer cancel()
	d.kill(t)  // SIGKILL mid-run: nothing is cleaned up by the daemon itself
	d.start(t) // replaces the stale socket, recovers leftovers
	waitGone(t, marker)
	d.assertClean(t, id)
	if !strings.Contains(d.log.String(), "recovered leftovers") {
		t.Errorf("the restarted daemon did not report recovery:\n%s", d.log)
	}
	res, err := d.client.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"true"}})
	if err != nil || res.Status != agentapi.StatusOK {
		t.Errorf("run after recovery: %+v, %v", res, err)
	}
}

// A stopped daemon judges a run by what its sandbox did: a run that ended
// before its deadline while the daemon was SIGSTOPped past it keeps its
// verdict and output; one still running at its deadline is a timeout.
// Several runs at once: at SIGCONT each run's deadline timer races its
// wait, and before the fix some timers won.
func TestDaemonSIGSTOPKeepsTheVerdict(t *testing.T) {
	d := startDaemon(t, "--max-concurrent", "10")
	type run struct {
		name, script, want string
		python             bool
	}
	// Each run prints "started" first; the daemon is stopped once every
	// run has (on a slow host, such as the emulated v2 guest, a run still
	// being set up when the daemon stops has not had its time). The
	// deadline leaves a run that ends in time 9 s after its print, however
	// slow the machine's process starts: the stop, deadline and 1 s longer
	// from when the last run printed, is past every deadline all the same.
	const deadline = 10 * time.Second
	cases := []run{
		{"runs past its deadline", "echo started; echo done; sleep 60", agentapi.StatusTimeout, false},
		{"Python past its deadline", "print('started', flush=True)\nprint('done', flush=True)\nimport time\ntime.sleep(60)", agentapi.StatusTimeout, true},
	}
	for range 3 {
		cases = append(cases,
			run{"ends in time", "echo started; sleep 1; echo done", agentapi.StatusOK, false},
			run{"ends in time, nonzero", "echo started; sleep 1; echo done; exit 3", agentapi.StatusExitNonzero, false},
			run{"Python ends in time", "print('started', flush=True)\nimport time\ntime.sleep(1)\nprint('done')", agentapi.StatusOK, true})
	}
	results := make([]*agentapi.RunResult, len(cases))
	var wg, started sync.WaitGroup
	for i, tc := range cases {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			req := &agentapi.RunRequest{Argv: []string{"sh", "-c", tc.script}, Limits: &agentapi.Limits{TimeoutMs: deadline.Milliseconds()}}
			if tc.python {
				req.Argv, req.Language, req.Code = nil, agentapi.LanguagePython, tc.script
			}
			var once sync.Once
			res, err := d.client.RunStream(context.Background(), req, func(ev agentapi.Event) {
				if ev.Type == agentapi.EventStdout {
					once.Do(started.Done)
				}
			})
			once.Do(started.Done)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			results[i] = res
		}()
	}
	started.Wait()
	if err := d.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(deadline + time.Second) // past every deadline: each started before the last print
	if err := d.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, tc := range cases {
		if res := results[i]; res != nil && (res.Status != tc.want || strings.TrimSpace(res.Stdout) != "started\ndone") {
			t.Errorf("%s: status %s, stdout %q; want %s with its output", tc.name, res.Status, res.Stdout, tc.want)
		}
	}
}

func TestDaemonSecondInstanceRefused(t *testing.T) {
	d := startDaemon(t)
	cmd := execNsbox(d.args...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another nsbox daemon is serving") {
		t.Errorf("second daemon: %v\n%s\nwant a refusal", err, out)
	}
	if _, err := d.client.Health(context.Background()); err != nil {
		t.Errorf("first daemon after the second's attempt: %v", err)
	}
}
