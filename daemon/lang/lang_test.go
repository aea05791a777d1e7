package lang

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/agentapi"
	"github.com/nsbox/nsbox/container/runner"
	"github.com/nsbox/nsbox/daemon/errdefs"
)

// tree makes a tree with the files rel (empty, or symlinks when link).
func tree(t *testing.T, link bool, rel ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, r := range rel {
		p := filepath.Join(dir, r)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if link {
			err = os.Symlink("/nonexistent/on/the/host", p) // a sandbox's link: not followed
		} else {
			err = os.WriteFile(p, nil, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// argvOnlyTree makes a store's tree (<entry>/rootfs) with the files rel,
// whose meta.json says it is argv-only, as rootfs.Create writes it for a
// tree without python3 3.9 or newer.
func argvOnlyTree(t *testing.T, rel ...string) string {
	t.Helper()
	entry := t.TempDir()
	dir := filepath.Join(entry, "rootfs")
	if err := os.Rename(tree(t, false, rel...), dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(entry, "meta.json"), []byte(`{"name": "alpine", "python": "", "argv_only": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWireNamesAreBuiltins(t *testing.T) {
	for _, n := range []string{agentapi.LanguagePython, agentapi.LanguageBash, agentapi.LanguageJavaScript, agentapi.LanguageTypeScript} {
		if d, ok := Builtin(n); !ok || d.Name != n {
			t.Errorf("Builtin(%q) = %v, %v", n, d, ok)
		}
	}
	if d, ok := Builtin("python3"); !ok || d.Name != agentapi.LanguagePython {
		t.Errorf("the alias python3 gives %v, %v", d, ok)
	}
	for _, n := range []string{"", "Python", "node", "ruby"} {
		if _, ok := Builtin(n); ok {
			t.Errorf("Builtin(%q) found a language", n)
		}
	}
}

func TestCapabilities(t *testing.T) {
	type caps struct{ sessions, carriable, allowed, zygote, processes, contexts, oneShot, codeInArgv bool }
	for _, tc := range []struct {
		name      string
		kind      runner.Language
		transform runner.Transform
		want      caps
	}{
		{"python", runner.Python, "", caps{true, true, true, true, true, true, true, false}},
		{"bash", "", "", caps{oneShot: true, codeInArgv: true}},
		{"javascript", runner.JavaScript, "", caps{sessions: true, oneShot: true}},
		{"typescript", runner.JavaScript, runner.StripTypes, caps{sessions: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := Builtin(tc.name)
			got := caps{d.Sessions(), d.Carriable(), d.AllowedImports(), d.Zygote(), d.Processes(), d.Contexts(), d.HasOneShot(), d.CodeInArgv()}
			if d.Runner != tc.kind || d.Transform != tc.transform || got != tc.want {
				t.Errorf("runner %q transform %q caps %+v; want %q %q %+v", d.Runner, d.Transform, got, tc.kind, tc.transform, tc.want)
			}
		})
	}
	if !slices.Equal(Sessions(), []string{"python", "javascript", "typescript"}) {
		t.Errorf("Sessions() = %v", Sessions())
	}
}

func TestRunnerLanguages(t *testing.T) {
	if OfRunner(runner.JavaScript).Name != "javascript" || OfRunner("").Name != "python" || OfRunner(runner.Python).Name != "python" {
		t.Errorf("OfRunner: %s %s %s", OfRunner(runner.JavaScript).Name, OfRunner("").Name, OfRunner(runner.Python).Name)
	}
	if _, ok := Pooled("typescript"); ok {
		t.Error("a pool of typescript runners: a javascript runner serves it")
	}
	if _, ok := Pooled("bash"); ok {
		t.Error("a pool of bash runners: bash has none")
	}
	if l, ok := Pooled("javascript"); !ok || l.Runner != runner.JavaScript {
		t.Errorf("Pooled(javascript) = %v, %v", l, ok)
	}
	if !slices.Equal(PooledNames(), []string{"python", "javascript"}) {
		t.Errorf("PooledNames() = %v", PooledNames())
	}
	if l := BuiltinPool("node"); l == nil || l.Name != "javascript" {
		t.Errorf("BuiltinPool(node) = %v", l)
	}
}

func TestOnRootfs(t *testing.T) {
	r, err := New([]Declared{
		{Name: "octave", Argv: []string{"Rscript", FileArg}, Rootfs: []string{"stats"}},
		{Name: "lua", Argv: []string{"lua", "-"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, rootfs, dir string
		want              []string
	}{
		{"unknown tree", "default", "", []string{"python", "bash", "lua"}},
		{"minimal", "default", tree(t, false, "usr/bin/python3"), []string{"python", "bash", "lua"}},
		{"node", "default", tree(t, false, "usr/bin/node"), []string{"python", "bash", "javascript", "lua"}},
		{"node and esbuild, links", "stats", tree(t, true, "usr/bin/node", "usr/bin/esbuild"), []string{"python", "bash", "javascript", "typescript", "lua", "octave"}},
		{"R and Java, links", "default", tree(t, true, "usr/bin/python3", "usr/bin/Rscript", "usr/bin/jshell"), []string{"python", "bash", "r", "java", "lua"}},
		{"argv-only", "alpine", argvOnlyTree(t, "usr/bin/python3"), []string{"bash", "lua"}},
		{"argv-only with node", "alpine", argvOnlyTree(t, "usr/bin/node"), []string{"bash", "javascript", "lua"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.On(tc.rootfs, tc.dir); !slices.Equal(got, tc.want) {
				t.Errorf("On = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	r, err := New([]Declared{{Name: "octave", Argv: []string{"Rscript", FileArg}, Rootfs: []string{"stats"}}})
	if err != nil {
		t.Fatal(err)
	}
	node := tree(t, false, "usr/bin/node")
	argvOnly := argvOnlyTree(t)
	for _, tc := range []struct {
		name, rootfs, dir string
		want, err         string
	}{
		{"python3", "default", "", "python", ""},
		{"javascript", "default", node, "javascript", ""},
		{"javascript", "default", "", "", `"javascript" needs Node.js in the rootfs, and rootfs "default" has python, bash;`},
		{"typescript", "default", node, "", `"typescript" needs Node.js and esbuild in the rootfs, and rootfs "default" has python, bash, javascript;`},
		{"python", "alpine", argvOnly, "", `"python" needs python3 3.9 or newer in the rootfs, and rootfs "alpine" is argv-only (nsbox rootfs list says why; it runs bash): ` +
			`run a command there with argv (a run's "argv", nsbox exec --rootfs alpine -- CMD), or use a rootfs with python3 3.9 or newer`},
		{"python3", "alpine", argvOnly, "", `"python3" needs python3 3.9 or newer in the rootfs, and rootfs "alpine" is argv-only`},
		{"bash", "alpine", argvOnly, "bash", ""},
		{"r", "default", "", "", `"r" needs R (Rscript) in the rootfs, and rootfs "default" has python, bash; use a rootfs of the polyglot profile (nsbox rootfs build --profile polyglot)`},
		{"java", "default", tree(t, false, "usr/bin/jshell"), "java", ""},
		{"octave", "stats", "", "octave", ""},
		{"octave", "default", "", "", `"octave" is declared for rootfs stats only`},
		{"ruby", "default", "", "", `"ruby" is not a language of this daemon; rootfs "default" has python, bash (the operator declares more in [languages.NAME])`},
	} {
		t.Run(tc.name+"/"+tc.rootfs, func(t *testing.T) {
			d, err := r.Resolve(tc.name, tc.rootfs, tc.dir)
			if tc.err != "" {
				var fe *errdefs.FieldError
				if !errors.As(err, &fe) || fe.Field != "language" || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a field error on language with %q", err, tc.err)
				}
				return
			}
			if err != nil || d.Name != tc.want {
				t.Fatalf("Resolve = %v, %v; want %s", d, err, tc.want)
			}
		})
	}
}

func TestDeclared(t *testing.T) {
	for _, tc := range []struct {
		l   Declared
		err string
	}{
		{Declared{Name: "python3", Argv: []string{"x"}}, "built in"},
		{Declared{Name: "typescript", Argv: []string{"x"}}, "built in"},
		{Declared{Name: "R", Argv: []string{"x"}}, "use 1 to 32"},
		{Declared{Name: "octave"}, "argv is empty"},
		{Declared{Name: "octave", Argv: []string{"x"}, Extension: "R"}, "starting with a dot"},
	} {
		if err := tc.l.Check(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: Check() = %v, want %q", tc.l, err, tc.err)
		}
	}
	if _, err := New([]Declared{{Name: "octave", Argv: []string{"a"}}, {Name: "octave", Argv: []string{"b"}}}); err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Errorf("a language declared twice: %v", err)
	}

	r, err := New([]Declared{{Name: "octave", Argv: []string{"Rscript", FileArg}, Extension: ".R"}, {Name: "lua", Argv: []string{"lua", "-"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Resolve("octave", "default", "")
	p, ok := d.OneShot("cat(1)", "")
	if !ok || strings.Join(p.Argv, " ") != "Rscript /workspace/.nsbox/main.R" || p.File == nil || string(p.File.Data) != "cat(1)" || p.Stdin || d.StdinIsProgram() {
		t.Errorf("octave: %+v %v stdin-is-program %v", p, ok, d.StdinIsProgram())
	}
	d, _ = r.Resolve("lua", "default", "")
	if p, _ = d.OneShot("print(1)", ""); strings.Join(p.Argv, " ") != "lua -" || p.File != nil || !p.Stdin || !d.StdinIsProgram() {
		t.Errorf("lua: %+v", p)
	}
	if d.Sessions() || d.Carriable() || d.AllowedImports() {
		t.Error("a declared language has no runner, so no sessions, fork or allowed_imports")
	}
}

func TestOneShotBash(t *testing.T) {
	d, _ := Builtin("bash")
	for _, tc := range []struct {
		dir, want string
	}{
		{tree(t, false, "bin/sh"), "/bin/sh"},
		{tree(t, true, "usr/bin/bash"), "bash"},
		{tree(t, false, "bin/bash"), "bash"},
	} {
		if p, _ := d.OneShot("echo", tc.dir); p.Argv[0] != tc.want || strings.Join(p.Argv[1:], " ") != "-c echo" {
			t.Errorf("argv %v, want %s -c echo", p.Argv, tc.want)
		}
	}
	ts, _ := Builtin("typescript")
	if _, ok := ts.OneShot("let x: number = 1", ""); ok {
		t.Error("typescript has a one-shot program; node cannot strip types")
	}
}

// TestInfo checks the registry's rows as GET /v1/info describes them:
// every one titled and described, the default one marked, the
// capabilities read from the runner kind, declared rows last.
func TestInfo(t *testing.T) {
	r, err := New([]Declared{{Name: "octave", Argv: []string{"Rscript", FileArg}}})
	if err != nil {
		t.Fatal(err)
	}
	info := r.Info()
	if len(info) != len(builtin)+1 || info[len(info)-1].Name != "octave" || info[len(info)-1].Sessions || !info[len(info)-1].OneShot {
		t.Fatalf("info %+v: want the built-in rows, then octave (one-shot, no sessions)", info)
	}
	defaults := 0
	for _, l := range info {
		d, ok := Builtin(l.Name)
		if !ok {
			d = r.declared[l.Name]
		}
		if l.Title == "" || l.Description == "" {
			t.Errorf("%s: no title or description", l.Name)
		}
		if l.Default {
			defaults++
		}
		if l.Sessions != d.Sessions() || l.ForkPark != d.Carriable() || l.AllowedImports != d.AllowedImports() ||
			l.Zygote != d.Zygote() || l.OneShot != d.HasOneShot() || l.Runner != string(d.Runner) || l.Transform != string(d.Transform) {
			t.Errorf("%s: %+v does not match its descriptor", l.Name, l)
		}
	}
	if defaults != 1 || !info[0].Default || info[0].Name != Default().Name {
		t.Errorf("default marked %d times, want once, on %s", defaults, Default().Name)
	}
}

// TestOneShotPythonDedents: python3 -c gets the cell dedented, as its
// runner does, so an indented cell behaves alike on both paths.
func TestOneShotPythonDedents(t *testing.T) {
	d, _ := Builtin("python")
	p, _ := d.OneShot("\n    x = 1\n    print(x)\n", "")
	if got := strings.Join(p.Argv, " "); got != "python3 -c \nx = 1\nprint(x)\n" {
		t.Errorf("argv %q", got)
	}
}
