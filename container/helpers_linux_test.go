package container

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

func ioPipe(t *testing.T) (*io.PipeReader, *io.PipeWriter) {
	t.Helper()
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	return r, w
}

// waitFor polls cond for up to 30 s; a condition, not a timing assertion.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached in 30s")
}

// sandboxKind starts a sandbox one way: on the engine, or forked by a
// zygote (for python3 -c CODE commands, run there as python3 -I -c CODE).
type sandboxKind struct {
	name  string
	start func(context.Context, Spec) (*Sandbox, error)
}

// sandboxKinds are both ways, for tests of what each kind of process must
// do alike.
func sandboxKinds(t *testing.T, e *Engine) []sandboxKind {
	t.Helper()
	return []sandboxKind{
		{"engine", e.Start},
		// pid 1's binary comes between the workspace and the mounts.
		{"engine with init", func(ctx context.Context, s Spec) (*Sandbox, error) { s.Init = true; return e.Start(ctx, s) }},
		{"zygote", func(ctx context.Context, s Spec) (*Sandbox, error) {
			s.Argv = append([]string{"python3", "-I"}, s.Argv[1:]...)
			return zygoteFor(t, e, testenv.Rootfs(t)).Start(ctx, s)
		}},
	}
}

// runKind runs python3 -c code on kind k and waits for its result.
func runKind(t *testing.T, k sandboxKind, code string, lim Limits) *Result {
	t.Helper()
	sb, err := k.start(context.Background(), Spec{RootfsDir: testenv.Rootfs(t), Argv: []string{"python3", "-c", code}, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// lineWatch is a live output writer whose seen channel closes once the
// output so far contains want.
type lineWatch struct {
	mu   sync.Mutex
	buf  []byte
	want string
	seen chan struct{}
}

func newLineWatch(want string) *lineWatch {
	return &lineWatch{want: want, seen: make(chan struct{})}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf != nil && bytes.Contains(w.buf, []byte(w.want)) {
		return len(p), nil // seen already
	}
	w.buf = append(w.buf, p...)
	if bytes.Contains(w.buf, []byte(w.want)) {
		close(w.seen)
	}
	return len(p), nil
}
