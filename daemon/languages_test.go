package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// treeStore is a fakeStore that shows its trees (Store.Dir), where the
// language registry looks for what a language needs.
type treeStore struct{ *fakeStore }

func (s treeStore) Dir(name string) (string, error) {
	d, ok := s.dirs[name]
	if !ok {
		return "", ErrRootfsNotFound
	}
	return d, nil
}

// withFiles makes a rootfs tree with the files rel.
func withFiles(t *testing.T, rel ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, r := range rel {
		p := filepath.Join(dir, r)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLanguagesThroughTheRegistry runs each kind of language on a daemon
// with no Starter: the engine gets the language's one-shot program, and a
// language with none (typescript: node cannot strip types) is a 400 on
// language before anything runs.
func TestLanguagesThroughTheRegistry(t *testing.T) {
	r := &fakeRunner{}
	fs := &fakeStore{dirs: map[string]string{
		"default": withFiles(t, "bin/sh"),
		"other":   withFiles(t, "usr/bin/node", "usr/bin/esbuild"),
		"poly":    withFiles(t, "usr/bin/Rscript", "usr/bin/jshell"),
	}}
	d, err := New(Config{Engine: r, Rootfs: treeStore{fs}, MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)

	for _, tc := range []struct {
		lang, rootfs, argv, err string
	}{
		{"python", "default", "python3 -c 1", ""},
		{"python3", "default", "python3 -c 1", ""},
		{"bash", "default", "/bin/sh -c 1", ""},
		{"javascript", "other", "node -e 1", ""},
		{"javascript", "default", "", `"javascript" needs Node.js in the rootfs, and rootfs "default" has python, bash;`},
		{"typescript", "other", "", "typescript needs its runner (javascript)"},
		{"ruby", "other", "", `rootfs "other" has python, bash, javascript, typescript`},
		{"r", "poly", "Rscript --vanilla -e 1", ""},
		{"r", "default", "", `"r" needs R (Rscript) in the rootfs, and rootfs "default" has python, bash; use a rootfs of the polyglot profile`},
		{"java", "poly", "", `java runs only beside a session's interpreter, in contexts (E2B's code interpreter: runCode with language "java")`},
	} {
		t.Run(tc.lang+"/"+tc.rootfs, func(t *testing.T) {
			before := r.count()
			out, err := d.Run(context.Background(), &agentapi.RunRequest{Language: tc.lang, Code: "1", Rootfs: tc.rootfs}, RunOptions{})
			if tc.err != "" {
				var fe *errdefs.FieldError
				if !errors.As(err, &fe) || fe.Field != "language" || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a 400 on language with %q", err, tc.err)
				}
				if r.count() != before {
					t.Fatal("the engine ran a refused run")
				}
				return
			}
			if err != nil || out.Status != agentapi.StatusOK {
				t.Fatalf("Run: %+v, %v", out, err)
			}
			if got := strings.Join(r.last(t).Argv, " "); got != tc.argv {
				t.Errorf("argv %q, want %q", got, tc.argv)
			}
		})
	}

	info, err := d.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Languages["other"]; !slices.Equal(got, []string{"python", "bash", "javascript", "typescript"}) {
		t.Errorf("info languages on other: %v", got)
	}
	if got := info.Languages["default"]; !slices.Equal(got, []string{"python", "bash"}) {
		t.Errorf("info languages on default: %v", got)
	}
	// language_info describes every language listed, from the registry.
	described := map[string]agentapi.LanguageInfo{}
	for _, l := range info.LanguageInfo {
		described[l.Name] = l
	}
	for _, n := range info.Languages["other"] {
		if l, ok := described[n]; !ok || l.Title == "" || l.Description == "" {
			t.Errorf("language_info lacks %s: %+v", n, info.LanguageInfo)
		}
	}
	if py, ts := described["python"], described["typescript"]; !py.Default || !py.Sessions || !py.ForkPark ||
		ts.Runner != described["javascript"].Runner || ts.Transform == "" || ts.OneShot || described["bash"].Sessions {
		t.Errorf("language_info capabilities: %+v", info.LanguageInfo)
	}
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}
