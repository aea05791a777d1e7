package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// writerCell starts a cell's background writers and then waits: a child,
// a grandchild its parent left behind (re-parented), a shell loop (and its
// sleeps) and a thread, each writing lines of mark for ever, pace seconds
// apart (0: a tight loop). They write once all are started, so that the cap
// is passed with every one of them there.
const writerCell = `import os, subprocess, sys, threading, time
MARK, PACE = %q, %q
W = r"""
import os, sys, time
mark, pace, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
if name == 'orphan' and os.fork() != 0:
    os._exit(0)
open('/tmp/ready-' + name, 'w').close()
while not os.path.exists('/tmp/go'):
    time.sleep(0.001)
line = (mark + ' ' + name + '\n') * 128
while True:
    sys.stdout.write(line)
    sys.stdout.flush()
    if pace:
        time.sleep(pace)
"""
open('/tmp/w.py', 'w').write(W)
for name in ('child', 'orphan'):
    subprocess.Popen([sys.executable, '/tmp/w.py', MARK, PACE, name])
subprocess.Popen(['sh', '-c', 'touch /tmp/ready-sh; while [ ! -e /tmp/go ]; do sleep 0.001; done; while :; do echo "$0 sh"; sleep $1; done', MARK, PACE])
def thread():
    while not os.path.exists('/tmp/go'):
        time.sleep(0.001)
    while True:
        sys.stdout.write((MARK + ' thread\n') * 128)
        sys.stdout.flush()
        if float(PACE):
            time.sleep(float(PACE))
threading.Thread(target=thread, name=MARK + '-thread', daemon=True).start()
while not all(os.path.exists('/tmp/ready-' + n) for n in ('child', 'orphan', 'sh')):
    time.sleep(0.001)
open('/tmp/go', 'w').close()
time.sleep(60)`

// untilNone waits (up to 30 s: only a writer that lives on meets it) until
// no process of the sandbox has mark in its command line and no thread of
// the interpreter in its name, and says what is left.
const untilNone = `import os, threading, time
def cmd(p):
    try:
        return open('/proc/%%s/cmdline' %% p, 'rb').read().decode(errors='replace')
    except OSError:
        return ''
def left():
    return [c for c in (cmd(p) for p in os.listdir('/proc') if p.isdigit()) if %[1]q in c] + [t.name for t in threading.enumerate() if %[1]q in t.name]
end = time.monotonic() + 30
while left() and time.monotonic() < end:
    time.sleep(0.01)
left()`

// A cell whose background writers pass its output cap has every one of
// them cut off, however they are paced (tight, or sleeping 1, 5 or 50 ms
// between writes; a writer that sleeps was missed when it was an orphan
// re-parented out of the interpreter's tree, as it is with init, where
// pid 1 is a reaper and not the interpreter): the result says so, none of
// them is left in the sandbox, and no later exec has a byte of theirs. The
// verdict does not hang on timing: each writer writes its marker for ever,
// so one that lived on would still be there, and the later cells wait for
// them to be gone (a killed one may take a moment) before looking.
func TestOutputCapCutsPacedWriters(t *testing.T) {
	for _, init := range []bool{false, true} {
		for _, pace := range []string{"0", "0.001", "0.005", "0.05"} {
			t.Run(fmt.Sprintf("init=%v/sleep=%s", init, pace), func(t *testing.T) { pacedWriters(t, init, pace) })
		}
	}
}

// pacedWriters is one case of TestOutputCapCutsPacedWriters.
func pacedWriters(t *testing.T, init bool, pace string) {
	t.Helper()
	m, _ := newManager(t, Config{OutputBytes: 1 << 30}) // far past what the writers write before the cut
	s := create(t, m, Options{Processes: true, Init: init, Limits: container.Limits{Timeout: time.Minute, OutputBytes: 64 << 10}})
	mark := "nsbox-writer-" + strings.ReplaceAll(pace, ".", "")
	res := run(t, s, fmt.Sprintf(writerCell, mark, pace))
	if res.Status != runner.StatusOutputLimit || res.Killed ||
		!strings.Contains(res.Error, "process(es) it started that went on writing to its output were killed") ||
		!strings.Contains(res.Error, "1 thread(s) it started were stopped") {
		t.Fatalf("flood: %s killed=%v %q; want output_limit, alive, the writers killed and the thread stopped", res.Status, res.Killed, res.Error)
	}
	if left := run(t, s, fmt.Sprintf(untilNone, mark)); left.Status != runner.StatusOK || left.Value != "[]" || strings.Contains(string(left.Stdout), mark) {
		t.Fatalf("the writers after the cut: %s %s (stdout %.200q)", left.Status, left.Value, left.Stdout)
	}
	for i := range 3 {
		res := run(t, s, fmt.Sprintf("print('own %d')", i))
		if res.Status != runner.StatusOK || string(res.Stdout) != fmt.Sprintf("own %d\n", i) || len(res.Stderr) != 0 {
			t.Fatalf("exec %d after the flood: %s stdout %.200q stderr %.200q", i, res.Status, res.Stdout, res.Stderr)
		}
	}
	if info := s.Info(); info.State != StateIdle {
		t.Fatalf("after the flood: %s (%s)", info.State, info.DeadReason)
	}
}

// A thread of a capped cell that wrote without flushing has its bytes in
// the interpreter's stdout buffer when SystemExit ends it: they are the
// cell's, thrown away, not the next cell's. The thread writes its marker
// once the runner waits for its next request (the cell has ended and its
// output was flushed), then spins until it is stopped.
func TestOutputCapDropsStoppedThreadsBuffer(t *testing.T) {
	m, _ := newManager(t, Config{OutputBytes: 1 << 30})
	s := create(t, m, Options{Limits: container.Limits{Timeout: time.Minute, OutputBytes: 64 << 10}})
	res := run(t, s, "import sys, threading, time\n"+
		"main = threading.main_thread().ident\n"+
		"def late():\n    while sys._current_frames()[main].f_code.co_name != '_read': pass\n"+
		"    sys.stdout.write('nsbox-buffered-mark')\n    while True: pass\n"+
		"threading.Thread(target=late, daemon=True).start()\n"+
		"sys.stdout.write('y' * (128 << 10)); sys.stdout.flush()\ntime.sleep(60)")
	if res.Status != runner.StatusOutputLimit || res.Killed || !strings.Contains(res.Error, "1 thread(s) it started were stopped") {
		t.Fatalf("flood: %s killed=%v %q; want output_limit, alive, its thread stopped", res.Status, res.Killed, res.Error)
	}
	for i := range 3 {
		res := run(t, s, fmt.Sprintf("print('own %d')", i))
		if res.Status != runner.StatusOK || string(res.Stdout) != fmt.Sprintf("own %d\n", i) {
			t.Fatalf("exec %d after the flood: %s stdout %.200q", i, res.Status, res.Stdout)
		}
	}
}
