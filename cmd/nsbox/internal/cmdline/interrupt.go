package cmdline

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Interruptible is ctx until SIGINT or SIGTERM comes (Ctrl-C, or a
// supervisor's stop), then cancelled: the run it carries is ended,
// through the daemon or in-process alike. caught says which signal came,
// nil if none; stop ends the catching.
func Interruptible(ctx context.Context) (_ context.Context, caught func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var mu sync.Mutex
	var got os.Signal
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			mu.Lock()
			got = s
			mu.Unlock()
			cancel()
		case <-done:
		}
	}()
	caught = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel()
		})
	}
	return ctx, caught, stop
}

// Interrupted is the exit of a run a signal ended: 128+N as a shell gives
// it, 130 for Ctrl-C, whatever the run's own verdict after its kill.
func Interrupted(sig os.Signal) error {
	n, _ := sig.(syscall.Signal)
	return cli.Exit("interrupted", 128+int(n))
}
