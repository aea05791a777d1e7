package zygote

import (
	"slices"
	"testing"
)

func TestImports(t *testing.T) {
	for _, c := range []struct {
		code string
		want []string // nil: unknown
	}{
		{"print(1)", []string{}},
		{"import pandas; print(1)", []string{"pandas"}},
		{"import numpy as np, pandas.io.json as j\nimport os", []string{"numpy", "os", "pandas"}},
		{"from sklearn.linear_model import (\n  LinearRegression,\n  Ridge)\nx = 1", []string{"sklearn"}},
		{"from . import x\nfrom .y import z\nimport json", []string{"json"}},
		{"try: import scipy\nexcept ImportError: pass", []string{"scipy"}},
		{"if True:\n    import matplotlib.pyplot as plt\n", []string{"matplotlib"}},
		{"x = 'import sklearn'\n# import scipy\ns = '''\nimport torch\n'''", []string{}},
		{"s = r'\\'' ; import numpy", []string{"numpy"}},
		{"s = f\"{1}\"\nimport numpy", []string{"numpy"}},
		{"x = 1 \\\n + 2; import a", []string{"a"}},
		{"d = {'from': 1}\nprint(d['from'])", []string{}},
		{"def f():\n    from pandas import DataFrame\n    return DataFrame", []string{"pandas"}},
		{"m = __import__('sklearn')", nil},
		{"import importlib\nm = importlib.import_module('sklearn')", nil},
		{"s = 'unterminated\nimport numpy", nil},
		{"s = '''never ends\nimport numpy", nil},
		{"importx = 1\nfromage = 2", []string{}},
	} {
		got := Imports(c.code)
		if (got == nil) != (c.want == nil) || !slices.Equal(got, c.want) {
			t.Errorf("Imports(%q) = %#v, want %#v", c.code, got, c.want)
		}
	}
}

// Imports reads a run's code, which is hostile input: any string returns,
// without a panic, in time linear in its length.
func FuzzImports(f *testing.F) {
	for _, s := range []string{"import a", "from a import b", "'''", "\"\\", "r'\\'", "import (a,", "from . import", "\\\n", "(((( import x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		for _, m := range Imports(code) {
			if !isName(m) {
				t.Errorf("Imports(%q) has %q, not a name", code, m)
			}
		}
	})
}
