package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pythons are the interpreters a user may install the package with:
// Debian's, and the python3 first in PATH when it is another (pyenv's,
// conda's, uv's), whose pip cannot run Debian's setuptools wheel.
func pythons(t *testing.T) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		real, err := exec.Command(path, "-c", "import sys, os; print(os.path.realpath(sys.executable))").Output()
		if err != nil || seen[strings.TrimSpace(string(real))] {
			continue
		}
		seen[strings.TrimSpace(string(real))] = true
		out = append(out, path)
	}
	if len(out) == 0 {
		t.Skip("requires a python3")
	}
	return out
}

// venvFor makes a fresh venv with py, or skips (outside CI) when py has no
// venv module with pip (Debian's needs python3-venv, as make deps installs).
func venvFor(t *testing.T, py string) string {
	t.Helper()
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", venv).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s -m venv failed (Debian: install python3-venv, as make deps does): %v\n%s", py, err, out)
		}
		t.Fatalf("%s -m venv: %v\n%s", py, err, out)
	}
	return venv
}

// TestPythonPackageInstallsOffline: `pip install --no-index ./agentapi/python`
// (the README's command, with no index at all), `pip install -e`, and the
// wheel `make python-wheel` writes install on every python3 here, Debian's
// or not, with nothing from an index and nothing written into the source
// tree (setuptools needed setuptools>=61 from PyPI, or Debian's wheel of it,
// which fails on any other Python with AttributeError: install_layout, and
// left build/ and nsbox.egg-info/ in the checkout).
func TestPythonPackageInstallsOffline(t *testing.T) {
	src, err := filepath.Abs(filepath.Join(repoRoot, "agentapi", "python"))
	if err != nil {
		t.Fatal(err)
	}
	before := treeListing(t, src)
	for _, py := range pythons(t) {
		t.Run(py, func(t *testing.T) {
			venv := venvFor(t, py)
			pip := func(args ...string) {
				t.Helper()
				cmd := exec.Command(filepath.Join(venv, "bin", "pip"), append([]string{"install", "--no-index", "--no-cache-dir"}, args...)...)
				// No index and no find-links, whatever the user's pip.conf says.
				cmd.Env = append(os.Environ(), "PIP_FIND_LINKS=", "PIP_INDEX_URL=http://127.0.0.1:9/", "PIP_CONFIG_FILE=/dev/null")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("pip install --no-index %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			imported := func(wantDir string) {
				t.Helper()
				out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
					"import nsbox, importlib.metadata as m; print(nsbox.__file__); print(m.version('nsbox')); print(nsbox.Client)").CombinedOutput()
				if err != nil {
					t.Fatalf("import nsbox: %v\n%s", err, out)
				}
				if !strings.HasPrefix(string(out), wantDir) || !strings.Contains(string(out), "\n0.1.0\n") {
					t.Fatalf("import nsbox: got\n%s\nwant the package under %s, version 0.1.0", out, wantDir)
				}
			}
			pip(src)
			imported(venv)
			pip("-e", src)
			imported(src)

			// make python-wheel's way: the backend run as a script.
			dist := t.TempDir()
			out, err := exec.Command(py, filepath.Join(src, "_build", "nsbox_build.py"), dist).CombinedOutput()
			if err != nil {
				t.Fatalf("nsbox_build.py: %v\n%s", err, out)
			}
			whl := strings.TrimSpace(string(out))
			if filepath.Base(whl) != "nsbox-0.1.0-py3-none-any.whl" {
				t.Fatalf("nsbox_build.py printed %q, want DIR/nsbox-0.1.0-py3-none-any.whl", out)
			}
			pip("--force-reinstall", whl)
			imported(venv)
		})
	}
	if after := treeListing(t, src); after != before {
		t.Errorf("installing wrote into the source tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// treeListing lists dir's files, __pycache__ aside (Python's own, ignored
// by git, written by any import).
func treeListing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "__pycache__" {
			return filepath.SkipDir
		}
		b.WriteString(p + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
