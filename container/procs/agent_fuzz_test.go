package procs

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzAgentFrames plays a hostile agent (code in the sandbox that took it
// over could write anything on its socket): the stream goes to the host's
// Agent while a start and a subscription are waiting on it. The Agent
// must neither panic nor hang: every waiter returns once the stream ends.
func FuzzAgentFrames(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x10{\"id\":1,\"pid\":7}\x00\x00\x00\x16{\"pid\":7,\"out\":\"aGk=\"}\x00\x00\x00\x1a{\"pid\":7,\"end\":true,\"code\":3}"))
	f.Add([]byte("\x00\x00\x00\x10{\"id\":1,\"pid\":7}\x00\x00\x00\x1e{\"pid\":7,\"end\":true,\"signal\":-5}"))
	f.Add([]byte("\x00\x00\x00\x10{\"id\":1,\"pid\":0}\x00\x00\x00\x1d{\"id\":1,\"error\":\"x\",\"kind\":\"\"}"))
	f.Add([]byte("\x00\x00\x00\x04null\x00\x00\x00\x07{\"id\":}"))
	f.Add([]byte("\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		theirs := os.NewFile(uintptr(fds[1]), "agent-sandbox")
		defer theirs.Close()
		a, err := New(os.NewFile(uintptr(fds[0]), "agent"), 2)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		a.slow = time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		started := make(chan *Process, 1)
		go func() {
			p, _ := a.Start(ctx, Config{Cmd: "/bin/true"})
			started <- p
		}()
		// The start's request is on the socket before the stream answers it.
		var req [4]byte
		if _, err := theirs.Read(req[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := theirs.Write(stream); err != nil {
			t.Fatal(err)
		}
		theirs.Close()
		p := <-started
		for p != nil {
			if _, err := p.Next(ctx); err != nil {
				if ctx.Err() != nil {
					t.Fatalf("a subscription hung after the stream ended")
				}
				break
			}
		}
		select {
		case <-a.Done():
		case <-ctx.Done():
			t.Fatal("the agent's reader hung after the stream ended")
		}
	})
}
