package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/nsbox/nsbox/container"
)

// OCI runs the command with an OCI runtime's `run` (runc, crun,
// gVisor's runsc) from a bundle made by `runc spec`: Docker's default shape
// (pid, net, ipc, uts, mount namespaces, read-only root), on the same
// rootfs.
type OCI struct {
	bin    string
	global []string // the runtime's flags before `run`
	dir    string   // bundle and the runtime's state
	prefix string
	n      atomic.Int64
}

// NewOCI makes the bundle and tries one run: a runtime that cannot
// run here (crun on a hybrid cgroup layout, say) is refused with its own
// words, for the report's skipped list.
func NewOCI(ctx context.Context, bin, pkg string, global []string, root string, argv []string) (*OCI, error) {
	if _, err := exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("not installed (apt-get install %s)", pkg)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, errors.New("the bundle is made by `runc spec`: apt-get install runc")
	}
	dir, err := os.MkdirTemp("", "nsbox-bench-"+bin+"-")
	if err != nil {
		return nil, err
	}
	b := &OCI{bin: bin, global: append(global, "--root", filepath.Join(dir, "state")), dir: dir, prefix: "nsbox-bench-" + container.NewID()[:6]}
	if err := b.bundle(root, argv); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.Run(ctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("cannot run here: %s", strings.TrimPrefix(err.Error(), "exit status 1: "))
	}
	return b, nil
}

func (b *OCI) bundle(root string, argv []string) error {
	bundle := filepath.Join(b.dir, "bundle")
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return err
	}
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		return fmt.Errorf("runc spec: %v: %s", err, out)
	}
	p := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = argv
	proc["cwd"] = "/workspace"
	proc["user"] = map[string]any{"uid": 1000, "gid": 1000}
	spec["root"] = map[string]any{"path": root, "readonly": true}
	linux := spec["linux"].(map[string]any)
	// Own cgroup per run, removed by the runtime when the run ends.
	delete(linux, "cgroupsPath")
	raw, _ = json.Marshal(spec)
	return os.WriteFile(p, raw, 0o600)
}

// Run runs the command once in a new container of the bundle.
func (b *OCI) Run(ctx context.Context) error {
	id := fmt.Sprintf("%s-%d", b.prefix, b.n.Add(1))
	args := append(append([]string{}, b.global...), "run", "--bundle", filepath.Join(b.dir, "bundle"), id)
	return Quiet(exec.CommandContext(ctx, b.bin, args...))
}

// Close removes the bundle and the runtime's state.
func (b *OCI) Close() { os.RemoveAll(b.dir) }
