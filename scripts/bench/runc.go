package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"

	"github.com/nsbox/nsbox/container"
)

// runcBaseline runs the command with `runc run` from a bundle made by
// `runc spec`: Docker's default shape (pid, net, ipc, uts, mount
// namespaces, read-only root), on the same rootfs.
type runcBaseline struct {
	dir    string // bundle and runc state
	prefix string
	n      atomic.Int64
}

func newRuncBaseline(root string, argv []string) (*runcBaseline, error) {
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, errors.New("not installed (apt-get install runc)")
	}
	dir, err := os.MkdirTemp("", "nsbox-bench-runc-")
	if err != nil {
		return nil, err
	}
	b := &runcBaseline{dir: dir, prefix: "nsbox-bench-" + container.NewID()[:6]}
	bundle := filepath.Join(dir, "bundle")
	if err := os.Mkdir(bundle, 0o700); err != nil {
		b.close()
		return nil, err
	}
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		b.close()
		return nil, fmt.Errorf("runc spec: %v: %s", err, out)
	}
	p := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		b.close()
		return nil, err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		b.close()
		return nil, err
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = argv
	proc["cwd"] = "/workspace"
	proc["user"] = map[string]any{"uid": 1000, "gid": 1000}
	spec["root"] = map[string]any{"path": root, "readonly": true}
	linux := spec["linux"].(map[string]any)
	// Own cgroup per run, removed by runc when the run ends.
	delete(linux, "cgroupsPath")
	raw, _ = json.Marshal(spec)
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *runcBaseline) run(ctx context.Context) error {
	id := fmt.Sprintf("%s-%d", b.prefix, b.n.Add(1))
	cmd := exec.CommandContext(ctx, "runc", "--root", filepath.Join(b.dir, "state"), "run", "--bundle", filepath.Join(b.dir, "bundle"), id)
	return quiet(cmd)
}

func (b *runcBaseline) close() { os.RemoveAll(b.dir) }
