package build

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// A profile is a set of Debian packages and what to trim after installing.
type profile struct {
	packages []string
	// imports is run after trimming as a smoke test of the tree: a Python
	// script that must exit 0.
	imports string
	// purge lists packages removed with dpkg --purge --force-depends after
	// the install: build-time dependencies nothing imports or runs at run
	// time (compilers, headers, perl). Those not installed are skipped.
	purge []string
	// exclude lists dpkg path-exclude globs beyond commonExcludes (dpkg's
	// fnmatch: "*" also matches "/").
	exclude []string
	// trimTests lists dist-packages dirs whose */tests/ subdirs are dropped
	// (test suites only; nothing imports them at run time).
	trimTests []string
	// fontCache builds matplotlib's font cache into the tree and seeds a
	// sandbox's cache dir from it at Python start-up.
	fontCache bool
	// dirs are made in the tree before any package is installed: those a
	// maintainer script needs that path-exclude keeps dpkg from making.
	dirs []string
	// shellCheck is a /bin/sh script run last in the new tree, with a
	// /proc and the host's /dev (checkShell): a smoke test of what needs
	// them (a JVM).
	shellCheck string
}

// polyglotCheck runs R and Java's JShell as the r and java guests do
// (container/runner/guest).
const polyglotCheck = `set -e
test "$(Rscript --vanilla -e 'cat(sum(1:10))')" = 55
printf 'System.out.println(6 * 7)\n/exit\n' | jshell -q | grep -q 42
`

// has reports whether the profile installs pkg.
func (p profile) has(pkg string) bool { return slices.Contains(p.packages, pkg) }

// commonExcludes are dpkg path-exclude globs every build applies: files no
// sandbox reads (docs, man pages, translations, C headers, static libraries).
func commonExcludes() []string {
	return []string{
		"/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*",
		"/usr/share/locale/*", "/usr/share/lintian/*",
		"/usr/include/*", "/usr/lib/*.a",
	}
}

// commonIncludes re-include what commonExcludes would drop but must stay.
func commonIncludes() []string {
	return []string{"/usr/share/doc/*/copyright"}
}

// commonPurge is the full perl that usrmerge drags in: perl-base (essential,
// /usr/bin/perl) stays.
func commonPurge() []string {
	return []string{
		"perl", "libperl5.36", "perl-modules-5.36", "libgdbm-compat4",
		"libfile-find-rule-perl", "libnumber-compare-perl", "libtext-glob-perl",
	}
}

// datasciPurge is the build toolchain python3-scipy's dependency on
// python3-pythran pulls in (a C++ compiler, boost and BLAS headers, Python
// headers), plus unicode-data, which python3-fonttools depends on but
// nothing reads at run time.
func datasciPurge() []string {
	return []string{
		// pythran and what only it needs
		"python3-pythran", "python3-gast", "python3-beniget", "python3-ply",
		"libxsimd-dev", "libboost-dev", "libboost1.74-dev",
		"libopenblas-dev", "libopenblas-pthread-dev", "libblas-dev", "liblapack-dev",
		"python3-all-dev", "libpython3-all-dev", "python3-dev", "python3.11-dev",
		"libpython3-dev", "libpython3.11-dev", "libexpat1-dev", "zlib1g-dev",
		"libjs-sphinxdoc", "libjs-underscore",
		// compilers and binutils
		"g++", "g++-12", "gcc", "gcc-12", "cpp", "cpp-12", "libgcc-12-dev",
		"libstdc++-12-dev", "libcc1-0", "libasan8", "libtsan2", "liblsan0",
		"libubsan1", "libhwasan0", "libitm1", "libatomic1", "libisl23", "libmpc3",
		"libmpfr6", "binutils", "binutils-common", "binutils-x86-64-linux-gnu",
		"libbinutils", "libctf0", "libctf-nobfd0", "libgprofng0", "libjansson4",
		// C library headers
		"libc6-dev", "libc-dev-bin", "linux-libc-dev", "libcrypt-dev",
		"libnsl-dev", "libtirpc-dev", "rpcsvc-proto",
		"unicode-data",
	}
}

// datasciCheck imports every package of the profile and does a small
// computation in each of the big ones.
const datasciCheck = `
import io
import numpy, pandas, scipy, scipy.optimize, scipy.stats, sklearn, sklearn.linear_model
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot, statsmodels.api, sympy, mpmath, openpyxl, xlrd, PIL.Image
import seaborn, tqdm, dateutil.parser, pytz, joblib
import pip, venv, requests, cloudpickle
a = numpy.arange(6.0).reshape(2, 3)
assert numpy.dot(a, a.T)[1, 1] == 50.0
df = pandas.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
assert df.groupby("k")["v"].sum()["a"] == 4
r = scipy.optimize.minimize(lambda x: (x[0] - 3.0) ** 2, [0.0])
assert abs(r.x[0] - 3.0) < 1e-4, r
assert abs(scipy.stats.norm.cdf(0.0) - 0.5) < 1e-12
x = numpy.arange(10.0).reshape(-1, 1)
m = sklearn.linear_model.LinearRegression().fit(x, 2.0 * x.ravel() + 1.0)
assert abs(m.coef_[0] - 2.0) < 1e-9
fig, ax = matplotlib.pyplot.subplots()
ax.plot([1, 2, 3], [1, 4, 9])
buf = io.BytesIO()
fig.savefig(buf, format="png")
assert buf.getvalue()[:4] == b"\x89PNG"
y = 1.0 + 2.0 * numpy.arange(20.0) + numpy.sin(numpy.arange(20.0))
ols = statsmodels.api.OLS(y, statsmodels.api.add_constant(numpy.arange(20.0))).fit()
assert abs(ols.params[1] - 2.0) < 0.1, ols.params
f = lambda v: v + 1
assert cloudpickle.loads(cloudpickle.dumps(f))(1) == 2
assert sympy.simplify(sympy.sin(sympy.Symbol("t")) ** 2 + sympy.cos(sympy.Symbol("t")) ** 2) == 1
import os, stat, subprocess, tempfile
def sh(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, (args, r.returncode, r.stderr)
# git opens /dev/null first thing and reads /dev/urandom; the build removed
# the tree's device nodes (a sandbox mounts a /dev of its own), so the
# check makes the two.
for name, minor in (("null", 3), ("urandom", 9)):
    os.mknod("/dev/" + name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
try:
    with tempfile.TemporaryDirectory() as d:
        sh("git", "init", "-q", "-b", "main", d + "/r")
        sh("git", "-C", d + "/r", "-c", "user.name=n", "-c", "user.email=e@x", "commit", "-q", "--allow-empty", "-m", "m")
        sh("git", "clone", "-q", d + "/r", d + "/c")
    sh("curl", "--version")
finally:
    os.remove("/dev/null")
    os.remove("/dev/urandom")
`

func profiles() map[string]profile {
	datasci := profile{
		packages: []string{
			"python3", "python3-numpy", "python3-pandas", "python3-scipy",
			"python3-matplotlib", "python3-sklearn", "python3-statsmodels",
			"python3-sympy", "python3-mpmath", "python3-openpyxl", "python3-xlrd",
			"python3-pil", "python3-seaborn", "python3-tqdm", "python3-dateutil",
			"python3-tz", "python3-joblib",
			// fork and park carry cell-defined functions, classes and
			// lambdas (docs/SESSIONS.md)
			"python3-cloudpickle",
			// pip and venv for installs through the egress proxy
			// (docs/NETWORK.md), and requests, the HTTP client agents use
			"python3-pip", "python3-venv", "python3-requests",
			// JavaScript and TypeScript (issue 18): Node.js, acorn
			// (the runner's top-level await), esbuild (strips types)
			"nodejs", "node-acorn", "esbuild",
			// git and curl, which E2B's sandboxes have and its SDK's
			// sandbox.git drives (git's perl scripts go with perl:
			// commonPurge; the commands the SDK runs are built in)
			"git", "curl",
		},
		imports: datasciCheck,
		purge:   append(commonPurge(), datasciPurge()...),
		// esbuild's WebAssembly build (11 MiB), for platforms without
		// the native binary; require("esbuild") runs /usr/bin/esbuild
		exclude:   []string{"/usr/lib/*/nodejs/esbuild-wasm/*"},
		fontCache: true,
		trimTests: []string{
			"numpy", "pandas", "scipy", "sklearn", "matplotlib", "mpl_toolkits",
			"statsmodels", "sympy", "mpmath", "openpyxl", "PIL", "seaborn", "joblib",
			"tqdm", "dateutil", "pytz",
		},
	}
	polyglot := datasci
	// R and Java (E2B's code interpreter has both): R's interpreter and
	// OpenJDK with JShell, which the r and java guests drive.
	polyglot.packages = append(slices.Clip(datasci.packages), "r-base-core", "openjdk-17-jdk-headless")
	polyglot.shellCheck = polyglotCheck
	// OpenJDK's postinst links its man pages into /usr/share/man/man1
	// with update-alternatives, which fails when the directory is missing
	// (commonExcludes keeps dpkg from making it).
	polyglot.dirs = []string{"/usr/share/man/man1"}
	return map[string]profile{
		"minimal": {
			packages: []string{"python3"},
			imports:  "import json, sqlite3, ssl, decimal",
			purge:    commonPurge(),
		},
		"datasci":  datasci,
		"polyglot": polyglot,
	}
}

// Profiles lists the names Options.Profile accepts.
func Profiles() []string {
	var out []string
	for n := range profiles() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func lookupProfile(name string) (profile, error) {
	p, ok := profiles()[name]
	if !ok {
		return p, fmt.Errorf("%w %q: choose one of %s", ErrUnknownProfile, name, strings.Join(Profiles(), ", "))
	}
	return p, nil
}
