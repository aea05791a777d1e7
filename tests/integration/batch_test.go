package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/agentapi/client"
)

// A batch of 1,000 runs on a daemon whose run slots and queue are full
// when it starts: every run is answered, correctly, none refused (the
// batch waits for slots instead of taking 429s); an invalid run is one
// error line and the rest go on; a plain run is still refused 429 while
// the queue is full; nothing is left behind.
func TestBatch(t *testing.T) {
	d := startDaemon(t, "--max-concurrent", "2", "--queue", "1")
	ctx := context.Background()
	const n = 1000

	// Fill both run slots and the queue with 1.5 s runs.
	var fill sync.WaitGroup
	for range 3 {
		fill.Add(1)
		go func() {
			defer fill.Done()
			if res, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"sleep", "1.5"}}); err != nil || res.Status != agentapi.StatusOK {
				t.Errorf("filler run: %+v %v", res, err)
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := d.client.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.InFlight == 2 && info.Queued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fillers never filled the slots and the queue: %d in flight, %d queued", info.InFlight, info.Queued)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}}); !isStatus(err, http.StatusTooManyRequests) {
		t.Fatalf("a plain run with the queue full: %v, want 429", err)
	}

	req := &agentapi.BatchRequest{}
	for i := range n {
		req.Runs = append(req.Runs, agentapi.RunRequest{Language: agentapi.LanguagePython, Code: fmt.Sprintf("print(%d)", i)})
	}
	bad := len(req.Runs)
	req.Runs = append(req.Runs, agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "1", Limits: &agentapi.Limits{MemoryBytes: -1}})
	shell := len(req.Runs)
	req.Runs = append(req.Runs, agentapi.RunRequest{Language: agentapi.LanguageBash, Code: "echo shell; exit 3"})

	seen := map[int]agentapi.BatchItem{}
	t0 := time.Now()
	sum, err := d.client.RunBatch(ctx, req, func(it agentapi.BatchItem) {
		if _, dup := seen[it.Index]; dup {
			t.Errorf("run %d answered twice", it.Index)
		}
		seen[it.Index] = it
	})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	fill.Wait()
	if len(seen) != len(req.Runs) {
		t.Fatalf("%d of %d runs answered", len(seen), len(req.Runs))
	}
	for i := range n {
		it := seen[i]
		if it.Type != agentapi.BatchResult || it.Result == nil || it.Result.Status != agentapi.StatusOK || it.Result.Stdout != fmt.Sprintf("%d\n", i) {
			t.Fatalf("run %d: %+v (result %+v)", i, it, it.Result)
		}
	}
	if it := seen[bad]; it.Type != agentapi.BatchError || it.Error == nil || it.Error.Code != agentapi.CodeInvalidArgument {
		t.Errorf("the invalid run: %+v, want an invalid_argument error line", it)
	}
	if it := seen[shell]; it.Result == nil || it.Result.Status != agentapi.StatusExitNonzero || it.Result.ExitCode != 3 || it.Result.Stdout != "shell\n" {
		t.Errorf("the shell run: %+v", it.Result)
	}
	if want := (agentapi.BatchSummary{Runs: n + 2, OK: n, Failed: 1, Errors: 1, WallMs: sum.WallMs}); *sum != want {
		t.Errorf("summary %+v, want %+v", *sum, want)
	}
	t.Logf("%d runs in %s: %.0f runs/s through one batch at concurrency 2", len(req.Runs), wall.Round(time.Millisecond), float64(len(req.Runs))/wall.Seconds())
	d.waitIdle(t)
	d.assertClean(t)
}

// A malformed batch is refused whole, with the field named.
func TestBatchRefusesMalformed(t *testing.T) {
	d := startDaemon(t, "--max-concurrent", "2")
	ctx := context.Background()
	one := []agentapi.RunRequest{{Language: agentapi.LanguagePython, Code: "1"}}
	for _, tc := range []struct {
		req  *agentapi.BatchRequest
		want string
	}{
		{&agentapi.BatchRequest{}, "runs"},
		{&agentapi.BatchRequest{Runs: make([]agentapi.RunRequest, agentapi.MaxBatchRuns+1)}, "split the batch"},
		{&agentapi.BatchRequest{Runs: one, Concurrency: 3}, "max_concurrent (2)"},
		{&agentapi.BatchRequest{Runs: one, Concurrency: -1}, "concurrency"},
	} {
		_, err := d.client.RunBatch(ctx, tc.req, nil)
		var ae *agentapi.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("batch %d runs, concurrency %d: %v, want 400 naming %q", len(tc.req.Runs), tc.req.Concurrency, err, tc.want)
		}
	}
	// A client that goes away cancels the runs not yet finished.
	cctx, cancel := context.WithCancel(ctx)
	req := &agentapi.BatchRequest{Concurrency: 1}
	for range 50 {
		req.Runs = append(req.Runs, agentapi.RunRequest{Argv: []string{"sleep", "0.2"}})
	}
	got := 0
	_, err := (&client.Client{Socket: d.sock}).RunBatch(cctx, req, func(agentapi.BatchItem) {
		if got++; got == 2 {
			cancel()
		}
	})
	if err == nil {
		t.Error("a cancelled batch returned no error")
	}
	d.waitIdle(t)
	d.assertClean(t)
}

// isStatus reports an API error with the HTTP status code.
func isStatus(err error, code int) bool {
	var ae *agentapi.Error
	return errors.As(err, &ae) && ae.Status == code
}

// SIGTERM during a batch: the runs in flight finish, the ones not yet
// started are answered "unavailable" (send them to the next daemon) at
// once rather than run through the grace period, the answer ends with its
// summary, and the daemon exits cleanly.
func TestBatchDrain(t *testing.T) {
	d := startDaemon(t, "--max-concurrent", "1", "--shutdown-grace", "30s")
	req := &agentapi.BatchRequest{Concurrency: 1}
	for range 200 {
		req.Runs = append(req.Runs, agentapi.RunRequest{Argv: []string{"sleep", "0.1"}})
	}
	type answer struct {
		sum *agentapi.BatchSummary
		err error
	}
	done := make(chan answer, 1)
	first := make(chan struct{})
	var once sync.Once
	var items []agentapi.BatchItem
	go func() {
		sum, err := d.client.RunBatch(context.Background(), req, func(it agentapi.BatchItem) {
			items = append(items, it)
			once.Do(func() { close(first) })
		})
		done <- answer{sum, err}
	}()
	<-first
	// Timed from the signal, not the batch's start: a slow first run is
	// not the drain's time. Run through the 30 s grace, it takes ~30 s.
	sig := time.Now()
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-done
	took := time.Since(sig)
	if a.err != nil {
		t.Fatalf("batch during a drain: %v", a.err)
	}
	unavailable := 0
	for _, it := range items {
		if it.Error != nil && it.Error.Code == agentapi.CodeUnavailable {
			unavailable++
		}
	}
	if len(items) != 200 || a.sum.OK+unavailable != 200 || a.sum.OK == 0 || unavailable == 0 {
		t.Errorf("%d answers, summary %+v, %d unavailable: want every run answered, ok or unavailable", len(items), *a.sum, unavailable)
	}
	if took > 15*time.Second {
		t.Errorf("the batch took %s to answer after SIGTERM: the runs not started should have been refused, not run through the grace", took)
	}
	<-d.Exited
	if d.ExitErr != nil {
		t.Errorf("daemon exit after the drain: %v", d.ExitErr)
	}
	d.assertClean(t)
}

// `nsbox batch FILE`: JSON lines of runs in, the daemon's answer lines out
// (one per run, then done), the counts on stderr.
func TestBatchCLI(t *testing.T) {
	d := startDaemon(t)
	file := filepath.Join(t.TempDir(), "runs.jsonl")
	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, "{\"language\": \"python\", \"code\": \"print(%d * 2)\"}\n\n", i)
	}
	in.WriteString(`{"argv": ["sh", "-c", "exit 4"]}` + "\n")
	if err := os.WriteFile(file, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := execNsbox("batch", "--socket", d.sock, "--concurrency", "2", file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nsbox batch: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d answer lines, want 6 runs and done:\n%s", len(lines), out)
	}
	got := map[int]agentapi.BatchItem{}
	for _, l := range lines {
		var it agentapi.BatchItem
		if err := json.Unmarshal([]byte(l), &it); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got[it.Index] = it
	}
	for i := range 5 {
		if r := got[i].Result; r == nil || r.Stdout != fmt.Sprintf("%d\n", i*2) {
			t.Errorf("run %d: %+v", i, got[i])
		}
	}
	if r := got[5].Result; r == nil || r.ExitCode != 4 {
		t.Errorf("the shell run: %+v", got[5])
	}
	if done := got[-1].Done; done == nil || done.OK != 5 || done.Failed != 1 || !strings.Contains(stderr.String(), "6 runs: 5 ok, 1 failed, 0 not run") {
		t.Errorf("done %+v, stderr %q", done, stderr.String())
	}
	// A file the daemon would refuse names its line.
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"code\": \"1\"}\n{\"language\": \"python\", \"cod\": \"1\"}\n"), 0o644)
	if msg, err := execNsbox("batch", "--socket", d.sock, bad).CombinedOutput(); err == nil || !strings.Contains(string(msg), "bad.jsonl:2: json: unknown field \"cod\"") {
		t.Errorf("a misspelt field: %v %s", err, msg)
	}
}
