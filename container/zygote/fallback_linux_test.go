package zygote

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/runner"
)

// recorder keeps the messages of the records logged at Info and above.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// count counts the messages with prefix.
func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// Runs beyond a zygote's children start cold, and say so: Stats counts
// them as full with the reason and time, and the log warns once per spell
// of fallbacks (not once per run) and says when forks resume.
func TestFullZygoteFallsBackAndSaysSo(t *testing.T) {
	dir := testenv.Rootfs(t)
	rec := &recorder{}
	s, _ := newSetLog(t, dir, slog.New(rec), Profile{Rootfs: "r", Modules: []string{"json"}, Children: 1, Bare: true})
	const warn, back = "WARN zygote could not take a run", "INFO zygote takes runs again"
	start := func() *runner.Runner {
		t.Helper()
		r, err := runner.Start(context.Background(), s, container.Spec{RootfsDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	holder := start()
	if !holder.Forked() {
		t.Fatal("the first runner was not the zygote's child")
	}
	var cold []*runner.Runner
	for range 3 {
		r := start()
		if r.Forked() {
			t.Fatal("a runner beyond children 1 was forked")
		}
		cold = append(cold, r)
	}
	st := s.Stats()[0]
	if st.Fallbacks != 3 || st.Full != 3 || st.Children != 1 || st.Live != 1 ||
		!strings.Contains(st.LastFallback, "children alive") || st.LastFallbackAt.IsZero() {
		t.Fatalf("stats %+v, want 3 fallbacks, all full, with the reason and time", st)
	}
	if n := rec.count(warn); n != 1 {
		t.Fatalf("%d warnings for a spell of 3 fallbacks, want 1: %q", n, rec.msgs)
	}
	holder.Close()
	for _, r := range cold {
		r.Close()
	}
	if r := start(); !r.Forked() {
		t.Fatal("with its child gone, the zygote did not take the next runner")
	}
	if n := rec.count(back); n != 1 {
		t.Fatalf("%d 'takes runs again' lines, want 1: %q", n, rec.msgs)
	}
	start() // a second spell warns again
	if n := rec.count(warn); n != 2 {
		t.Fatalf("%d warnings after a second spell, want 2: %q", n, rec.msgs)
	}
}
