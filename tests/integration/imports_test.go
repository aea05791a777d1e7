package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/agentapi"
)

// wantFieldError fails t unless err is a 400 whose message names field.
func wantFieldError(t *testing.T, err error, field string) {
	t.Helper()
	var ae *agentapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, field) {
		t.Fatalf("got %v, want a 400 naming %s", err, field)
	}
}

// TestAllowedImportsPandas: a run on the data-science rootfs with pandas,
// numpy and matplotlib allowed imports and plots with them (pandas' own
// imports of os and the rest are free), and the same list refuses os,
// subprocess and socket: in a cold sandbox, where the cell's import loads
// pandas, and in a zygote's child, where pandas is loaded already.
func TestAllowedImportsPandas(t *testing.T) {
	rootfs := dataSciRootfs(t)
	t.Run("cold", func(t *testing.T) { allowedImportsPandas(t, startDaemon(t), rootfs) })
	t.Run("zygote", func(t *testing.T) {
		d := startDaemon(t, "--config", writeConf(t, fmt.Sprintf("[zygote]\nrootfs = [%q]\nchildren = 4\n", rootfs)))
		d.waitZygote(t, 0)
		allowedImportsPandas(t, d, rootfs)
		d.checkForked(t, 4)
	})
}

func allowedImportsPandas(t *testing.T, d *daemon, rootfs string) {
	t.Helper()
	ctx := context.Background()
	allowed := []string{"pandas", "numpy", "matplotlib"}
	res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Rootfs: rootfs, AllowedImports: allowed,
		Code: "import pandas as pd\nimport matplotlib.pyplot as plt\ndf = pd.DataFrame({'a': [1, 2]})\n" +
			"df.to_csv('out.csv')\nplt.plot(df.a)\nplt.show()\nint(pd.read_csv('out.csv').a.sum())"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentapi.StatusOK || res.Value != "3" || len(res.Figures) != 1 {
		t.Fatalf("pandas with pandas allowed: status %q value %v figures %d exception %+v stderr %s", res.Status, res.Value, len(res.Figures), res.Exception, res.Stderr)
	}
	for _, mod := range []string{"os", "subprocess", "socket"} {
		res, err := d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Rootfs: rootfs, AllowedImports: allowed,
			Code: "import pandas\nimport " + mod})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != agentapi.StatusException || res.Exception == nil || res.Exception.Name != "ImportError" ||
			!strings.Contains(res.Exception.Value, "'"+mod+"' is not allowed: allowed_imports is ['pandas', 'numpy', 'matplotlib']") {
			t.Errorf("import %s: status %q exception %+v; want ImportError naming the list", mod, res.Status, res.Exception)
		}
	}
}

// TestAllowedImportsRefusals: allowed_imports is checked before a sandbox
// starts: Python only, module names only, not with an init.
func TestAllowedImportsRefusals(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	_, err := d.client.Run(ctx, &agentapi.RunRequest{Argv: []string{"true"}, AllowedImports: []string{"os"}})
	wantFieldError(t, err, "allowed_imports")
	_, err = d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguageBash, Code: "true", AllowedImports: []string{"os"}})
	wantFieldError(t, err, "allowed_imports")
	_, err = d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "1", AllowedImports: []string{"json", "os/path"}})
	wantFieldError(t, err, "allowed_imports[1]")
	_, err = d.client.CreateSession(ctx, &agentapi.SessionRequest{AllowedImports: []string{"json", ".."}})
	wantFieldError(t, err, "allowed_imports[1]")
	// A run with an init goes to the engine, where no runner enforces it.
	_, err = d.client.Run(ctx, &agentapi.RunRequest{Language: agentapi.LanguagePython, Code: "1", AllowedImports: []string{"json"}, Init: true})
	wantFieldError(t, err, "allowed_imports")
}

// TestSessionAllowedImportsAndLifetime: a session's allowlist binds every
// exec and shows in its info; lifetime_ms ends it that long after its
// creation even while it is used, and above the daemon's max_lifetime it
// is refused.
func TestSessionAllowedImportsAndLifetime(t *testing.T) {
	d := startDaemon(t, "--session-max-lifetime", "1h")
	ctx := context.Background()
	// 10 s: the two execs below fit in it on a busy machine too.
	s, err := d.client.CreateSession(ctx, &agentapi.SessionRequest{AllowedImports: []string{"json"}, LifetimeMs: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if life := s.ExpiresAt.Sub(s.CreatedAt); life != 10*time.Second || len(s.AllowedImports) != 1 {
		t.Fatalf("session %+v: want a 10 s lifetime and the allowlist", s)
	}
	if res := execOK(t, d, s.ID, "import json; json.dumps(1)"); res.Value != "'1'" {
		t.Fatalf("value %v", res.Value)
	}
	res, err := d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "import os"})
	if err != nil || res.Exception == nil || res.Exception.Name != "ImportError" {
		t.Fatalf("import os in the session: %v %+v", err, res)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		info, err := d.client.Session(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == agentapi.SessionDead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session outlived its 10 s lifetime by a minute: %+v", info)
		}
		_, _ = d.client.Exec(ctx, s.ID, &agentapi.ExecRequest{Code: "1"}) // in use, yet it ends at its lifetime
	}
	_, err = d.client.CreateSession(ctx, &agentapi.SessionRequest{LifetimeMs: int64(2 * time.Hour / time.Millisecond)})
	wantFieldError(t, err, "lifetime_ms")
}
