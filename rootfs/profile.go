package rootfs

import (
	"fmt"
	"sort"
	"strings"
)

// A profile is a set of Debian packages and what to trim after installing.
type profile struct {
	packages []string
	// imports is run after trimming as a smoke test of the tree.
	imports string
	// trimTests lists dist-packages dirs whose */tests/ subdirs are dropped
	// (test suites only; nothing imports them at run time).
	trimTests []string
}

func profiles() map[string]profile {
	return map[string]profile{
		"minimal": {
			packages: []string{"python3"},
			imports:  "import json, sqlite3, ssl, decimal",
		},
		"datasci": {
			packages: []string{
				"python3", "python3-numpy", "python3-pandas", "python3-scipy",
				"python3-matplotlib", "python3-sklearn", "python3-statsmodels",
				"python3-sympy", "python3-mpmath", "python3-openpyxl", "python3-xlrd",
				"python3-pil", "python3-seaborn", "python3-tqdm", "python3-dateutil",
				"python3-tz", "python3-joblib",
			},
			imports: "import numpy, pandas, scipy.stats, scipy.optimize, sklearn.linear_model, " +
				"matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot, statsmodels.api, sympy, " +
				"mpmath, openpyxl, xlrd, PIL.Image, seaborn, tqdm, dateutil.parser, pytz, joblib",
			trimTests: []string{
				"numpy", "pandas", "scipy", "sklearn", "matplotlib", "mpl_toolkits",
				"statsmodels", "sympy", "mpmath", "openpyxl", "PIL", "seaborn", "joblib",
				"tqdm", "dateutil", "pytz",
			},
		},
	}
}

// Profiles lists the names BuildOptions.Profile accepts.
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
