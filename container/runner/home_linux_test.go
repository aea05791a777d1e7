package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container/internal/testenv"
	"github.com/nsbox/nsbox/container/procs"
)

// TestSetHome: a runner given a home (an E2B sandbox's /home/user) runs its
// cells there with $HOME set to it, and the process agent started after,
// and its commands, inherit both; a runner given none stays in
// /workspace, and a home that is not a directory changes nothing.
func TestSetHome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newEngine(t)
	const where = "import os, pathlib\n(os.getcwd(), os.environ['HOME'], str(pathlib.Path.home()))"

	plain := startRunner(t, e, testenv.Rootfs(t))
	if got := exec(t, plain, where).Value; got != "('/workspace', '/workspace', '/workspace')" {
		t.Fatalf("without a home: %s", got)
	}
	if home, err := plain.SetHome(ctx, "/no/such/dir"); err != nil || home != "/workspace" {
		t.Fatalf("SetHome of a missing directory: %q %v", home, err)
	}
	if got := exec(t, plain, where).Value; got != "('/workspace', '/workspace', '/workspace')" {
		t.Fatalf("after a missing home: %s", got)
	}

	r := startRunner(t, e, testenv.Rootfs(t))
	if home, err := r.SetHome(ctx, "/home/user"); err != nil || home != "/home/user" {
		t.Fatalf("SetHome: %q %v", home, err)
	}
	if got := exec(t, r, where).Value; got != "('/home/user', '/home/user', '/home/user')" {
		t.Fatalf("cell: %s", got)
	}
	a, err := r.StartAgent(ctx)
	if err != nil {
		t.Fatalf("StartAgent: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	p, err := a.Start(ctx, procs.Config{Cmd: "/bin/sh", Args: []string{"-c", `pwd; echo "$HOME"; cd ~ && pwd`}})
	if err != nil {
		t.Fatalf("command: %v", err)
	}
	var out bytes.Buffer
	for {
		ev, err := p.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("command: %v", err)
		}
		if ev.Data != nil {
			out.Write(ev.Data.Stdout)
		}
	}
	if out.String() != "/home/user\n/home/user\n/home/user\n" {
		t.Fatalf("command's pwd, $HOME and ~: %q", out.String())
	}
}

func TestNodeSetHome(t *testing.T) {
	r := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if home, err := r.SetHome(ctx, "/home/user"); err != nil || home != "/home/user" {
		t.Fatalf("SetHome: %q %v", home, err)
	}
	if got := exec(t, r, "[process.cwd(), process.env.HOME, require('os').homedir()].join(' ')").Value; got != "'/home/user /home/user /home/user'" {
		t.Fatalf("cell: %s", got)
	}
}
