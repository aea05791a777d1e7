package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/cgroup"
	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/container/session"
	"github.com/nsbox/nsbox/daemon/errdefs"
	"github.com/nsbox/nsbox/daemon/policy"
	"github.com/nsbox/nsbox/daemon/volume"
	"github.com/nsbox/nsbox/rootfs"
)

// fakeRunner records specs and runs fn (default: exit 0, stdout "ok\n").
type fakeRunner struct {
	fn    func(ctx context.Context, spec container.Spec) (*container.Result, error)
	mu    sync.Mutex
	specs []container.Spec
}

func (f *fakeRunner) Run(ctx context.Context, spec container.Spec) (*container.Result, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx, spec)
	}
	if spec.Stdout != nil {
		spec.Stdout.Write([]byte("ok\n"))
	}
	return &container.Result{ID: spec.ID, Status: container.StatusOK, Stdout: []byte("ok\n"), StdoutBytes: 3}, nil
}

func (f *fakeRunner) last(t *testing.T) container.Spec {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.specs) == 0 {
		t.Fatal("the runner was never called")
	}
	return f.specs[len(f.specs)-1]
}

// fakeStore knows the rootfs names in dirs and counts what is held.
type fakeStore struct {
	dirs map[string]string
	mu   sync.Mutex
	held int
}

func (s *fakeStore) Acquire(name string) (string, func(), error) {
	d, ok := s.dirs[name]
	if !ok {
		return "", nil, fmt.Errorf("%q: %w", name, ErrRootfsNotFound)
	}
	s.mu.Lock()
	s.held++
	s.mu.Unlock()
	return d, func() { s.mu.Lock(); s.held--; s.mu.Unlock() }, nil
}

func (s *fakeStore) List() ([]string, error) { return []string{"default", "other"}, nil }

func (s *fakeStore) holding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func newTestDaemon(t *testing.T, r *fakeRunner, mod func(*Config)) (*Daemon, *fakeStore) {
	t.Helper()
	if r == nil {
		r = &fakeRunner{}
	}
	store := &fakeStore{dirs: map[string]string{"default": t.TempDir(), "other": t.TempDir()}}
	cfg := Config{Engine: r, Rootfs: store, MaxConcurrent: 2}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, store
}

func TestRunBuildsTheSpec(t *testing.T) {
	r := &fakeRunner{}
	d, store := newTestDaemon(t, r, func(c *Config) {
		c.Policy.DefaultLimits = container.Limits{Pids: 9}
		c.Policy.Profiles = []agentapi.Profile{{Name: "small", Limits: agentapi.Limits{MemoryBytes: 64 << 20, Pids: 5}}}
	})
	var started []string
	var results []*agentapi.RunResult
	var live strings.Builder
	opts := RunOptions{
		OnStart:  func(id string) { started = append(started, id) },
		OnStdout: func(b []byte) { live.Write(b) },
		OnResult: func(r *agentapi.RunResult) { results = append(results, r) },
	}
	req := &agentapi.RunRequest{
		Argv: []string{"cat", "in.txt"}, Stdin: "hello", Rootfs: "other", Profile: "small",
		Files:  []agentapi.File{{Path: "in.txt", Text: "data"}, {Path: "d/b.bin", ContentBase64: "AAEC", Mode: 0o755}},
		Env:    map[string]string{"B": "2", "A": "1"},
		Limits: &agentapi.Limits{TimeoutMs: 1500},
	}
	out, err := d.Run(context.Background(), req, opts)
	if err != nil {
		t.Fatal(err)
	}
	sp := r.last(t)
	if len(started) != 1 || started[0] != sp.ID || out.ID != sp.ID || len(results) != 1 || results[0] != out {
		t.Errorf("OnStart %q, OnResult %d times; spec id %q, result id %q", started, len(results), sp.ID, out.ID)
	}
	if live.String() != "ok\n" || out.Stdout != "ok\n" || out.Status != agentapi.StatusOK {
		t.Errorf("live output %q, result %+v", live.String(), out)
	}
	want := container.Limits{Timeout: 1500 * time.Millisecond, MemoryBytes: 64 << 20, Pids: 5}.Or(container.DefaultLimits())
	if sp.Limits != want {
		t.Errorf("limits %+v, want request over profile over defaults %+v", sp.Limits, want)
	}
	if sp.RootfsDir != store.dirs["other"] || !reflect.DeepEqual(sp.Env, []string{"A=1", "B=2"}) {
		t.Errorf("rootfs %q env %q", sp.RootfsDir, sp.Env)
	}
	wantFiles := []container.File{{Path: "in.txt", Data: []byte("data"), Mode: 0o644}, {Path: "d/b.bin", Data: []byte{0, 1, 2}, Mode: 0o755}}
	if !reflect.DeepEqual(sp.Files, wantFiles) {
		t.Errorf("files %+v", sp.Files)
	}
	if in, _ := io.ReadAll(sp.Stdin); string(in) != "hello" {
		t.Errorf("stdin %q", in)
	}
	if store.holding() != 0 || d.InFlight() != 0 {
		t.Errorf("after the run: %d rootfs held, %d slots", store.holding(), d.InFlight())
	}

	// Without a Starter, Python is an argv run; bash uses the rootfs's sh.
	for lang, argv0 := range map[string]string{agentapi.LanguagePython: "python3", agentapi.LanguageBash: "/bin/sh"} {
		if _, err := d.Run(context.Background(), &agentapi.RunRequest{Language: lang, Code: "x"}, RunOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := r.last(t).Argv; got[0] != argv0 || got[2] != "x" {
			t.Errorf("%s: argv %q", lang, got)
		}
		if r.last(t).Limits.Pids != 9 {
			t.Errorf("default limits not applied: %+v", r.last(t).Limits)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	errRunner := &fakeRunner{fn: func(_ context.Context, spec container.Spec) (*container.Result, error) {
		switch spec.Argv[0] {
		case "invalid":
			return nil, fmt.Errorf("argv: %w", container.ErrInvalidSpec)
		case "broken":
			return nil, errors.New("clone: operation not permitted")
		}
		return &container.Result{ID: spec.ID, Status: container.StatusOK}, nil
	}}
	d, _ := newTestDaemon(t, errRunner, func(c *Config) { c.Policy.MaxLimits = container.Limits{MemoryBytes: 1 << 30} })
	for _, tc := range []struct {
		name  string
		req   agentapi.RunRequest
		class error // nil: internal
		field string
	}{
		{"no command", agentapi.RunRequest{}, errdefs.ErrInvalidArgument, "argv"},
		{"both", agentapi.RunRequest{Argv: []string{"x"}, Language: "python", Code: "1"}, errdefs.ErrInvalidArgument, "argv"},
		{"language", agentapi.RunRequest{Language: "cobol", Code: "x"}, errdefs.ErrInvalidArgument, "language"},
		{"path", agentapi.RunRequest{Argv: []string{"x"}, Files: []agentapi.File{{Path: "../x"}}}, errdefs.ErrInvalidArgument, "files[0].path"},
		{"negative", agentapi.RunRequest{Argv: []string{"x"}, Limits: &agentapi.Limits{Pids: -1}}, errdefs.ErrInvalidArgument, "limits.pids"},
		{"above max", agentapi.RunRequest{Argv: []string{"x"}, Limits: &agentapi.Limits{MemoryBytes: 2 << 30}}, errdefs.ErrInvalidArgument, "limits.memory_bytes"},
		{"profile", agentapi.RunRequest{Argv: []string{"x"}, Profile: "nope"}, errdefs.ErrInvalidArgument, "profile"},
		{"rootfs", agentapi.RunRequest{Argv: []string{"x"}, Rootfs: "missing"}, errdefs.ErrInvalidArgument, ""},
		{"engine refuses", agentapi.RunRequest{Argv: []string{"invalid"}}, errdefs.ErrInvalidArgument, ""},
		{"engine fails", agentapi.RunRequest{Argv: []string{"broken"}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Run(context.Background(), &tc.req, RunOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, c := range errdefs.Classes() {
				if errors.Is(err, c) != (c == tc.class) {
					t.Errorf("%v: errors.Is(%v) = %v", err, c, !(c == tc.class))
				}
			}
			var fe *errdefs.FieldError
			if tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
				t.Errorf("%v: want a FieldError on %q", err, tc.field)
			}
		})
	}
	if d.InFlight() != 0 {
		t.Errorf("%d slots held after refused runs", d.InFlight())
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err, class error
	}{
		{session.ErrNotFound, errdefs.ErrNotFound},
		{container.ErrNotExist, errdefs.ErrNotFound},
		{session.ErrTooMany, errdefs.ErrExhausted},
		{session.ErrDead, errdefs.ErrSessionDead},
		{session.ErrBusy, errdefs.ErrSessionBusy},
		{session.ErrNoProcesses, errdefs.ErrInvalidArgument},
		{container.ErrExist, errdefs.ErrExists},
		{container.ErrFull, errdefs.ErrNoSpace},
		{runner.ErrState, errdefs.ErrInvalidArgument},
		{fmt.Errorf("%w: %w", runner.ErrState, runner.ErrStateTooLarge), errdefs.ErrTooLarge},
		{fmt.Errorf("%w: %w", runner.ErrState, runner.ErrStateBusy), errdefs.ErrUnavailable},
		{volume.ErrNotFound, errdefs.ErrNotFound},
		{volume.ErrExists, errdefs.ErrExists},
		{volume.ErrInUse, errdefs.ErrInUse},
		{volume.ErrInvalid, errdefs.ErrInvalidArgument},
		{volume.ErrNoSpace, errdefs.ErrNoSpace},
		{volume.ErrNoTools, errdefs.ErrUnavailable},
		{session.ErrClosed, errdefs.ErrUnavailable},
		{container.ErrInvalidPath, errdefs.ErrInvalidArgument},
		{container.ErrNotRegular, errdefs.ErrInvalidArgument},
		{rootfs.ErrNotFound, errdefs.ErrInvalidArgument},
		{container.ErrTooLarge, errdefs.ErrTooLarge},
		{cgroup.ErrFreezeTimeout, errdefs.ErrUnavailable},
	} {
		wrapped := fmt.Errorf("context: %w", tc.err)
		got := classify(wrapped)
		if !errors.Is(got, tc.class) || !errors.Is(got, tc.err) || !strings.Contains(got.Error(), "context: ") {
			t.Errorf("classify(%v) = %v: want both %v and %v, message kept", wrapped, got, tc.err, tc.class)
		}
		for _, c := range errdefs.Classes() {
			if c != tc.class && errors.Is(got, c) {
				t.Errorf("classify(%v) is also of class %v", wrapped, c)
			}
		}
	}
	if err := errors.New("x"); classify(err) != err || classify(nil) != nil {
		t.Error("classify changed an error of no class, or nil")
	}
}

// gatedRunner is an engine whose runs say their id on started and end ok
// once release is closed, or killed when their context ends first.
func gatedRunner(n int) (r *fakeRunner, started chan string, release chan struct{}) {
	started, release = make(chan string, n), make(chan struct{})
	r = &fakeRunner{fn: func(ctx context.Context, spec container.Spec) (*container.Result, error) {
		started <- spec.ID
		select {
		case <-release:
			return &container.Result{ID: spec.ID, Status: container.StatusOK}, nil
		case <-ctx.Done():
			return &container.Result{ID: spec.ID, Status: container.StatusKilled}, nil
		}
	}}
	return r, started, release
}

func TestAdmission(t *testing.T) {
	r, started, release := gatedRunner(4)
	d, _ := newTestDaemon(t, r, func(c *Config) { c.MaxConcurrent, c.QueueSize = 1, 1 })
	errc := make(chan error, 2)
	go func() {
		_, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"a"}}, RunOptions{})
		errc <- err
	}()
	<-started
	if !d.Saturated() {
		t.Error("one slot held, Saturated is false")
	}
	go func() {
		_, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"b"}}, RunOptions{})
		errc <- err
	}()
	for d.adm.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	_, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"c"}}, RunOptions{})
	if !errors.Is(err, ErrBusy) || !errors.Is(err, errdefs.ErrExhausted) {
		t.Errorf("third run: %v, want ErrBusy (exhausted)", err)
	}
	close(release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	d.Close()
	if _, err := d.Run(context.Background(), &agentapi.RunRequest{Argv: []string{"d"}}, RunOptions{}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("run after Close: %v, want unavailable", err)
	}
}

// TestTearDown checks the teardown tokens: with one free, the run slot is
// freed before the sandbox is gone; with none, the slot waits for it.
func TestTearDown(t *testing.T) {
	d, _ := newTestDaemon(t, nil, func(c *Config) { c.MaxConcurrent = 1 })
	slot := func() func() {
		rel, err := d.adm.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	var rootfsReleased sync.WaitGroup
	rootfsReleased.Add(2)
	d.tearDown(func() { <-gate1 }, rootfsReleased.Done, slot())
	if d.InFlight() != 0 || d.tearing.Load() != 1 {
		t.Fatalf("with a token: in flight %d, tearing %d; want the slot freed and one teardown", d.InFlight(), d.tearing.Load())
	}
	d.tearDown(func() { <-gate2 }, rootfsReleased.Done, slot())
	if d.InFlight() != 1 {
		t.Fatalf("without a token the slot must wait for the sandbox; in flight %d", d.InFlight())
	}
	close(gate2)
	for deadline := time.Now().Add(10 * time.Second); d.InFlight() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slot was not freed after its sandbox was gone")
		}
	}
	close(gate1)
	rootfsReleased.Wait()
	d.Close() // waits for every teardown
	if d.tearing.Load() != 0 || len(d.teardowns) != 0 {
		t.Errorf("after Close: tearing %d, tokens held %d", d.tearing.Load(), len(d.teardowns))
	}
}

func TestSessionsNeedAStarter(t *testing.T) {
	d, _ := newTestDaemon(t, nil, nil)
	if _, err := d.CreateSession(context.Background(), &agentapi.SessionRequest{}); !errors.Is(err, ErrNoSessions) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("CreateSession without a Starter: %v", err)
	}
	if _, err := d.Exec(context.Background(), "x", &agentapi.ExecRequest{Code: "1"}, RunOptions{}); !errors.Is(err, ErrNoSessions) {
		t.Errorf("Exec without a Starter: %v", err)
	}
	if got := d.Sessions(context.Background()); got == nil || len(got) != 0 {
		t.Errorf("Sessions() = %#v, want an empty list", got)
	}
}

// TestMayUse: the core asks daemon/caller (whose test holds the rules)
// with the admin group of its current policy, so Reconfigure moves it.
func TestMayUse(t *testing.T) {
	d, _ := newTestDaemon(t, nil, nil)
	staff := uint32(50)
	member := WithCaller(context.Background(), Caller{UID: 1001, Groups: []uint32{1001, staff}})
	for _, tc := range []struct {
		admin *uint32
		want  bool
	}{{nil, false}, {&staff, true}, {nil, false}} {
		if err := d.Reconfigure(policy.Policy{Sessions: policy.Sessions{AdminGID: tc.admin}}); err != nil {
			t.Fatal(err)
		}
		if got := d.mayUse(member, 1000); got != tc.want {
			t.Errorf("admin group %v: mayUse = %v, want %v", tc.admin, got, tc.want)
		}
	}
}
