package runner

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/container/internal/testenv"
)

// chartOf runs code, which must show exactly one figure, and returns
// that figure's chart.
func chartOf(t *testing.T, r *Runner, code string) map[string]any {
	t.Helper()
	res := execFigures(t, r, code, 1)
	if res.Figures[0].Chart == nil {
		t.Fatalf("the figure has no chart (stderr %s)", res.Stderr)
	}
	var c map[string]any
	if err := json.Unmarshal(res.Figures[0].Chart, &c); err != nil {
		t.Fatalf("chart %s: %v", res.Figures[0].Chart, err)
	}
	return c
}

// pluck is field of each element of c's elements.
func pluck(t *testing.T, c map[string]any, field string) []any {
	t.Helper()
	els, _ := c["elements"].([]any)
	var out []any
	for _, e := range els {
		out = append(out, e.(map[string]any)[field])
	}
	return out
}

func want(t *testing.T, c map[string]any, fields map[string]any) {
	t.Helper()
	for k, v := range fields {
		if !reflect.DeepEqual(c[k], v) {
			t.Errorf("%s = %#v, want %#v", k, c[k], v)
		}
	}
}

// wantEach checks, for each field, that field of each of c's elements.
func wantEach(t *testing.T, c map[string]any, fields map[string][]any) {
	t.Helper()
	for field, w := range fields {
		if got := pluck(t, c, field); !reflect.DeepEqual(got, w) {
			t.Errorf("%s %v, want %v", field, got, w)
		}
	}
}

func allOf[T any](vs []any) bool {
	for _, v := range vs {
		if _, ok := v.(T); !ok {
			return false
		}
	}
	return len(vs) > 0
}

func TestCharts(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	exec(t, r, "import matplotlib.pyplot as plt, numpy as np, datetime")

	t.Run("line", func(t *testing.T) {
		c := chartOf(t, r, `
days = [datetime.date(2024, 3, 1) + datetime.timedelta(days=i) for i in range(30)]
plt.figure(); plt.plot(days, np.sin(np.arange(30)), label='sin'); plt.plot(days, np.arange(30) * 0.1)
plt.xlabel('Day [d]'); plt.ylabel('Level (m)'); plt.title('Tide')`)
		want(t, c, map[string]any{"type": "line", "title": "Tide", "x_label": "Day [d]", "y_label": "Level (m)",
			"x_unit": "d", "y_unit": "m", "x_scale": "datetime", "y_scale": "linear"})
		if got := pluck(t, c, "label"); !reflect.DeepEqual(got, []any{"sin", "Line 2"}) {
			t.Errorf("labels %v", got)
		}
		pts, _ := pluck(t, c, "points")[0].([]any)
		if len(pts) != 30 || !reflect.DeepEqual(pts[0], []any{"2024-03-01", 0.0}) {
			t.Errorf("points %v", pts)
		}
		xt, _ := c["x_ticks"].([]any)
		if !allOf[string](xt) || !strings.HasPrefix(xt[0].(string), "2024-0") {
			t.Errorf("x_ticks %v", xt)
		}
		if yt, _ := c["y_ticks"].([]any); !allOf[float64](yt) {
			t.Errorf("y_ticks %v", yt)
		}
		if yl, _ := c["y_tick_labels"].([]any); !allOf[string](yl) || yl[0] == "" {
			t.Errorf("y_tick_labels %v (read before the figure was drawn?)", yl)
		}
	})
	t.Run("log and categorical scales", func(t *testing.T) {
		c := chartOf(t, r, "plt.figure(); plt.plot([1, 2, 3], ['a', 'b', 'c']); plt.xscale('log')")
		want(t, c, map[string]any{"type": "line", "x_scale": "log", "y_scale": "categorical", "title": nil, "x_label": nil, "x_unit": nil})
		if pts := pluck(t, c, "points")[0]; !reflect.DeepEqual(pts, []any{[]any{1.0, "a"}, []any{2.0, "b"}, []any{3.0, "c"}}) {
			t.Errorf("points %v", pts)
		}
	})
	t.Run("scatter", func(t *testing.T) {
		c := chartOf(t, r, "plt.figure(); plt.scatter([1, 2, 3], [4, 5, 6], label='a'); plt.scatter([7], [8]); plt.axhline(5)")
		want(t, c, map[string]any{"type": "scatter", "x_scale": "linear"})
		if got := pluck(t, c, "label"); !reflect.DeepEqual(got, []any{"a", "Points 2"}) {
			t.Errorf("labels %v", got)
		}
		if got := pluck(t, c, "points"); !reflect.DeepEqual(got[0], []any{[]any{1.0, 4.0}, []any{2.0, 5.0}, []any{3.0, 6.0}}) {
			t.Errorf("points %v", got)
		}
	})
	t.Run("bar", func(t *testing.T) {
		c := chartOf(t, r, "plt.figure(); plt.bar(['x', 'y', 'z'], [3, 1, 2], label='Q1'); plt.xlabel('Item'); plt.ylabel('Sold (units)')")
		want(t, c, map[string]any{"type": "bar", "x_label": "Item", "y_unit": "units"})
		wantEach(t, c, map[string][]any{"label": {"x", "y", "z"}, "value": {3.0, 1.0, 2.0}, "group": {"Q1", "Q1", "Q1"}})
	})
	t.Run("horizontal bar", func(t *testing.T) {
		c := chartOf(t, r, "plt.figure(); plt.barh(['x', 'y'], [5, 7]); plt.xlabel('Count'); plt.ylabel('Item')")
		want(t, c, map[string]any{"type": "bar", "x_label": "Item", "y_label": "Count"})
		wantEach(t, c, map[string][]any{"label": {"x", "y"}, "value": {5.0, 7.0}})
	})
	t.Run("pie", func(t *testing.T) {
		c := chartOf(t, r, "plt.figure(); plt.pie([9, 1], labels=['big', 'small'], autopct='%1.0f%%', startangle=90); plt.title('Share')")
		want(t, c, map[string]any{"type": "pie", "title": "Share"})
		wantEach(t, c, map[string][]any{"angle": {324.0, 36.0}, "label": {"big", "small"}, "radius": {1.0, 1.0}})
	})
	t.Run("box and whisker", func(t *testing.T) {
		c := chartOf(t, r, "fig, ax = plt.subplots(); ax.boxplot([[1, 2, 3, 4, 5], [10, 11, 12, 13, 30]], labels=['p', 'q'], patch_artist=True); ax.set_ylabel('Value')")
		want(t, c, map[string]any{"type": "box_and_whisker", "y_label": "Value", "x_label": nil})
		wantEach(t, c, map[string][]any{
			"label": {"p", "q"}, "min": {1.0, 10.0}, "first_quartile": {2.0, 11.0}, "median": {3.0, 12.0},
			"third_quartile": {4.0, 13.0}, "max": {5.0, 13.0}, "outliers": {[]any{}, []any{30.0}},
		})
	})
	t.Run("superchart", func(t *testing.T) {
		c := chartOf(t, r, "fig, axs = plt.subplots(1, 2); fig.suptitle('Both'); axs[0].plot([1, 2]); axs[0].set_title('L'); axs[1].scatter([1], [2]); axs[1].set_xlabel('X')")
		want(t, c, map[string]any{"type": "superchart", "title": "Both"})
		wantEach(t, c, map[string][]any{"type": {"line", "scatter"}, "x_label": {nil, "X"}})
	})
	t.Run("unknown", func(t *testing.T) {
		c := chartOf(t, r, "fig, ax = plt.subplots(); ax.add_artist(plt.Circle((0, 0), 1)); ax.set_title('Ring')")
		want(t, c, map[string]any{"type": "unknown", "title": "Ring", "elements": []any{}})
	})
	t.Run("no data, no chart", func(t *testing.T) {
		res := execFigures(t, r, "plt.figure()", 1)
		if c := res.Figures[0].Chart; c != nil {
			t.Fatalf("a figure with no data: chart %s, want none", c)
		}
	})
}

func TestDataFrameData(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	res := exec(t, r, "import pandas as pd, numpy as np\npd.DataFrame({'a': [1, 2, None], 'b': ['x', 'y', 'z'], 't': pd.to_datetime(['2024-01-02', None, '2024-01-03'])})")
	if res.Status != StatusOK || !strings.Contains(res.Value, "2024-01-02") {
		t.Fatalf("got %+v", res)
	}
	var d map[string][]any
	if err := json.Unmarshal(res.ValueData, &d); err != nil {
		t.Fatalf("value_data %s: %v", res.ValueData, err)
	}
	w := map[string][]any{"a": {1.0, 2.0, nil}, "b": {"x", "y", "z"}, "t": {"2024-01-02T00:00:00", "NaT", "2024-01-03T00:00:00"}}
	if !reflect.DeepEqual(d, w) {
		t.Errorf("value_data %v, want %v", d, w)
	}
	for _, code := range []string{"pd.Series([1, 2])", "1", "'x'", "x = pd.DataFrame({'a': [1]})"} {
		if res := exec(t, r, code); res.ValueData != nil {
			t.Errorf("%s: value_data %s", code, res.ValueData)
		}
	}
}

// TestRichForms: the last expression's _repr_*_ forms by MIME type, as
// IPython's display formatter finds them: an object's own (a (data,
// metadata) pair, a None form left out, one that raises skipped), a
// DataFrame's HTML table; a plain value has none.
func TestRichForms(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	exec(t, r, `class R:
    def _repr_html_(self): return '<b>hi</b>'
    def _repr_markdown_(self): return ('**hi**', {'isolated': True})
    def _repr_latex_(self): return None
    def _repr_svg_(self): raise ValueError('no svg')
    def _repr_json_(self): return {'k': [1, 2]}`)
	res := exec(t, r, "R()")
	want := map[string]string{"text/html": "<b>hi</b>", "text/markdown": "**hi**", "application/json": `{"k": [1, 2]}`}
	if res.Status != StatusOK || !reflect.DeepEqual(res.ValueMime, want) {
		t.Fatalf("value_mime %v (%s %+v), want %v", res.ValueMime, res.Status, res.Exception, want)
	}
	res = exec(t, r, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
	if h := res.ValueMime["text/html"]; !strings.Contains(h, "<table") || !strings.Contains(h, "<th>a</th>") {
		t.Errorf("a DataFrame's HTML: %q", h)
	}
	for _, code := range []string{"1", "'x'", "[1, 2]", "None"} {
		if res := exec(t, r, code); res.ValueMime != nil {
			t.Errorf("%s: value_mime %v", code, res.ValueMime)
		}
	}
}

func TestShownImages(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	exec(t, r, "from PIL import Image\nimport matplotlib.pyplot as plt\nimg = Image.new('RGBA', (16, 8), 'red')")
	tests := []struct {
		name, code string
		n          int
	}{
		{"show", "img.show()\nprint('done')", 1},
		{"last expression", "img", 1},
		{"save to a path", "img.save('a.png')", 1},
		{"save to a buffer", "import io\nimg.save(io.BytesIO(), 'PNG')", 0},
		{"display", "display(img, img)", 2},
		{"display a figure", "fig = plt.figure(); plt.plot([1, 2]); display(fig); plt.close(fig)", 1},
		{"display other", "display(42)", 0},
		{"savefig is not shown twice", "plt.plot([1, 2]); plt.savefig('f.png')", 1},
		{"many saves are capped", "for i in range(150): img.save('b.png')", 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range execFigures(t, r, tc.code, tc.n).Figures {
				if f.MIME != "image/png" || !strings.HasPrefix(string(f.Data), "\x89PNG") {
					t.Errorf("figure %q %q", f.MIME, f.Data[:min(8, len(f.Data))])
				}
			}
		})
	}
	if res := exec(t, r, "display(42)"); string(res.Stdout) != "42\n" {
		t.Errorf("display(42) printed %q", res.Stdout)
	}
}

// A pool runner that imported PIL before its first cell (its setup's
// preimport) shows images as one that imports it in a cell does.
func TestShownImagesPreimported(t *testing.T) {
	r := startRunner(t, newEngine(t), testenv.DataSciRootfs(t))
	if skipped, err := r.Preimport(context.Background(), []string{"PIL.Image"}, 0); err != nil || len(skipped) != 0 {
		t.Fatalf("preimport: skipped %v, %v", skipped, err)
	}
	execFigures(t, r, "from PIL import Image\nImage.new('L', (2, 2)).show()", 1)
}
