package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/nsbox/nsbox/container"
)

// relayChildEnv makes the test binary a stand-in for nsbox-bench: it says
// "ready" and exits 7 at SIGTERM, as nsbox-bench exits once cleaned up.
const relayChildEnv = "NSBOX_TEST_RELAY_CHILD"

// TestMain also lets the test binary be the sandboxes' init and reaper,
// as nsbox is (exec --no-daemon in TestExecExitCodesInProcess).
func TestMain(m *testing.M) {
	container.MaybeInit()
	if os.Getenv(relayChildEnv) != "" {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		os.Stdout.WriteString("ready\n")
		<-term
		os.Exit(7)
	}
	os.Exit(m.Run())
}

// A SIGTERM to `nsbox bench` reaches nsbox-bench, which has its say (its
// exit status), rather than killing the parent and leaving the child to
// run on alone.
func TestBenchRelaysSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- runRelaying(cmd) }()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := <-res; !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("runRelaying: %v, want the child's exit status 7", err)
	}
}

// An nsbox-bench a signal killed could print nothing: nsbox bench says
// so, with 128+N, instead of exiting 1 in silence. An exit status of its
// own is passed on as it is (nsbox-bench printed why).
func TestBenchExitNamesTheSignal(t *testing.T) {
	killed := exec.Command("sh", "-c", "kill -KILL $$").Run()
	err := benchExit("/x/nsbox-bench", killed)
	if code := exitCode(err); code != 137 || !strings.Contains(err.Error(), "/x/nsbox-bench was killed by SIGKILL") {
		t.Errorf("killed by SIGKILL: %q, exit %d; want a line naming the signal and 137", err, code)
	}
	err = benchExit("/x/nsbox-bench", exec.Command("sh", "-c", "exit 3").Run())
	if code := exitCode(err); code != 3 || err.Error() != "" {
		t.Errorf("exit 3: %q, exit %d; want 3 and no second message", err, code)
	}
	if err := benchExit("/x/nsbox-bench", nil); err != nil {
		t.Errorf("exit 0: %v", err)
	}
}
