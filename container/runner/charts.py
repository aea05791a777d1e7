# nsbox chart extraction: a matplotlib figure's data as a chart, a JSON
# object a program can read instead of a picture. Its shape is the one
# E2B's code interpreter calls Chart (docs/API.md, "Charts"), so that
# agents written against either read one format. The runner compiles this
# file the first time a figure is captured: a cell that draws nothing
# never pays for it. It reads the figure after it was drawn (savefig):
# tick labels are set only then.
import re
import sys
import datetime

_UNIT = re.compile(r'[(\[]([^()\[\]]*)[)\]]\s*$')


def figure_chart(fig):
    """The chart of figure fig, or None when it holds no data."""
    axes = list(fig.get_axes())
    if not any(ax.has_data() for ax in axes):
        return None
    if len(axes) == 1:
        return axes_chart(axes[0])
    title = fig.get_suptitle() if hasattr(fig, 'get_suptitle') else getattr(getattr(fig, '_suptitle', None), 'get_text', str)()
    return {'type': 'superchart', 'title': title or None, 'elements': [axes_chart(ax) for ax in axes]}


def axes_chart(ax):
    """The chart of one axes: its kind, told by what was drawn in it."""
    mpl = _modules()
    lines = list(ax.lines)
    drawn = lines + list(ax.collections) + list(ax.patches) + list(ax.images) + list(ax.tables)
    kind = 'unknown'
    if drawn and all(isinstance(a, mpl.Line2D) for a in drawn):
        kind = 'line'
    elif ax.patches and all(isinstance(p, mpl.PathPatch) for p in ax.patches) and \
            all(isinstance(a, (mpl.PathPatch, mpl.Line2D)) for a in drawn):
        kind = 'box_and_whisker'
    else:
        # Straight reference lines (axhline, axvline) do not make a
        # scatter, pie or bar chart something else.
        rest = [a for a in drawn if not (isinstance(a, mpl.Line2D) and _straight(a))]
        if not rest:
            pass
        elif all(isinstance(a, mpl.PathCollection) for a in rest):
            kind = 'scatter'
        elif all(isinstance(a, mpl.Wedge) for a in rest):
            kind = 'pie'
        elif all(isinstance(a, mpl.Rectangle) for a in rest) and ax.containers:
            kind = 'bar'
    title = ax.get_title() or None
    if kind == 'pie':
        return {'type': kind, 'title': title, 'elements': _wedges(ax, mpl)}
    if kind == 'unknown':
        return {'type': kind, 'title': title, 'elements': []}
    c = {'type': kind, 'title': title}
    for a, label in (('x', ax.get_xlabel()), ('y', ax.get_ylabel())):
        c[a + '_label'] = label or None
        m = _UNIT.search(label or '')
        c[a + '_unit'] = m.group(1).strip() if m else None
    if kind == 'bar':
        c['elements'], across = _bars(ax, mpl)
        return _categories_on_x(c) if across else c
    if kind == 'box_and_whisker':
        c['elements'], across = _boxes(ax, mpl)
        return _categories_on_x(c) if across else c
    for a, axis in (('x', ax.xaxis), ('y', ax.yaxis)):
        ticks = list(axis.get_ticklocs())
        scale = _scale(ax, axis, mpl)
        if scale == 'datetime':
            c[a + '_ticks'] = [mpl.dates.num2date(t).isoformat() for t in ticks]
        else:
            c[a + '_ticks'] = [_number(t) for t in ticks]
        c[a + '_tick_labels'] = [t.get_text() for t in axis.get_ticklabels()]
        c[a + '_scale'] = scale
    if kind == 'line':
        c['elements'] = [{'label': _label(l.get_label(), 'Line', i), 'points': _points(l.get_xdata(), l.get_ydata())}
                         for i, l in enumerate(lines)]
    else:
        c['elements'] = [{'label': _label(s.get_label(), 'Points', i), 'points': [[_value(x), _value(y)] for x, y in s.get_offsets()]}
                         for i, s in enumerate(ax.collections)]
    return c


class _modules:
    """matplotlib's artist classes, read from sys.modules: a figure exists,
    so pyplot (and with it all of these) is loaded."""

    def __init__(self):
        m = sys.modules
        self.Line2D = m['matplotlib.lines'].Line2D
        patches = m['matplotlib.patches']
        self.PathPatch, self.Wedge, self.Rectangle = patches.PathPatch, patches.Wedge, patches.Rectangle
        self.PathCollection = m['matplotlib.collections'].PathCollection
        self.dates = m['matplotlib.dates']
        self.category = m.get('matplotlib.category')


def _straight(line):
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def _scale(ax, axis, mpl):
    """datetime or categorical from the axis's units, else its scale's
    name (linear, log, symlog, logit, ...)."""
    fmt = axis.get_major_formatter()
    if isinstance(fmt, (mpl.dates.AutoDateFormatter, mpl.dates.ConciseDateFormatter, mpl.dates.DateFormatter)):
        return 'datetime'
    if mpl.category is not None and isinstance(axis.get_units(), mpl.category.UnitData):
        return 'categorical'
    return axis.get_scale()


def _label(label, kind, i):
    # matplotlib names what the user did not label _child3, _container0.
    return '%s %d' % (kind, i + 1) if not label or label.startswith('_') else label


def _round(x):
    # Drawing adds float noise (360 * 0.9 is 324.00000000000006): ten
    # significant digits are kept.
    return float('%.10g' % x)


def _number(x):
    x = float(x)
    return None if x != x or x in (float('inf'), float('-inf')) else _round(x)


def _value(v):
    """A data value as JSON: a number, a date's ISO form, or a string."""
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    np = sys.modules.get('numpy')
    if np is not None and isinstance(v, np.datetime64):
        return str(v.astype('datetime64[s]'))
    if isinstance(v, str):
        return v
    try:
        return _number(v)
    except (TypeError, ValueError):
        return str(v)


def _points(xs, ys):
    return [[_value(x), _value(y)] for x, y in zip(xs, ys)]


def _tick_names(axis):
    return {_round(t): lab.get_text() for t, lab in zip(axis.get_ticklocs(), axis.get_ticklabels())}


def _bars(ax, mpl):
    """One element per bar: its category (the tick label at its middle),
    value and group (its container's label). across: the bars are
    horizontal (barh), categories on y."""
    out, across = [], False
    for g, cont in enumerate(c for c in ax.containers if all(isinstance(p, mpl.Rectangle) for p in c)):
        across = getattr(cont, 'orientation', None) == 'horizontal'
        names = _tick_names(ax.yaxis if across else ax.xaxis)
        values = getattr(cont, 'datavalues', None)
        for i, r in enumerate(cont):
            mid = r.get_y() + r.get_height() / 2 if across else r.get_x() + r.get_width() / 2
            v = values[i] if values is not None else (r.get_width() if across else r.get_height())
            out.append({'label': names.get(_round(mid), '%g' % mid), 'value': _number(v),
                        'group': _label(cont.get_label(), 'Group', g)})
    return out, across


def _boxes(ax, mpl):
    """One element per box of a boxplot drawn with patch_artist: the box
    gives the quartiles, the line across it the median, the whiskers
    (lines from its ends) min and max, points beyond them the outliers."""
    spans = []
    for p in ax.patches:
        v = p.get_path().vertices
        spans.append((min(v[:, 0]), max(v[:, 0]), min(v[:, 1]), max(v[:, 1])))
    # Boxes of one plot have one width across the category axis: upright
    # boxes (the default) share their x extent's length.
    across = len(spans) > 1 and len({_round(s[1] - s[0]) for s in spans}) > 1 and len({_round(s[3] - s[2]) for s in spans}) == 1
    if across:
        spans = [(s[2], s[3], s[0], s[1]) for s in spans]
    names = _tick_names(ax.yaxis if across else ax.xaxis)
    boxes = [{'label': names.get(_round((lo + hi) / 2), ''), 'min': _round(q1), 'first_quartile': _round(q1), 'median': None,
              'third_quartile': _round(q3), 'max': _round(q3), 'outliers': []} for lo, hi, q1, q3 in spans]
    for line in ax.lines:
        xs, ys = [_round(float(x)) for x in line.get_xdata()], [_round(float(y)) for y in line.get_ydata()]
        if across:
            xs, ys = ys, xs
        if not xs:
            continue
        at = [i for i, (lo, hi, _, _) in enumerate(spans) if _round(lo) <= xs[0] <= _round(hi)]
        if not at:
            continue
        b, (lo, hi, q1, q3) = boxes[at[0]], spans[at[0]]
        if line.get_linestyle() in ('None', 'none', '', ' '):
            b['outliers'].extend(ys)
        elif len(ys) == 2 and ys[0] == ys[1] and xs[0] == _round(lo) and xs[1] == _round(hi):
            b['median'] = ys[0]
        elif len(ys) == 2 and xs[0] == xs[1]:
            if max(ys) == _round(q1):
                b['min'] = min(ys)
            elif min(ys) == _round(q3):
                b['max'] = max(ys)
    for b in boxes:
        b['outliers'].sort()
    return boxes, across


def _categories_on_x(c):
    # Horizontal bars or boxes: x_* names the category axis, as for
    # upright ones.
    c['x_label'], c['y_label'] = c['y_label'], c['x_label']
    c['x_unit'], c['y_unit'] = c['y_unit'], c['x_unit']
    return c


def _wedges(ax, mpl):
    # pie() computes its fractions in float32: 90% of the circle is
    # 323.9999914 degrees. Angles are kept to a ten-thousandth of one.
    return [{'label': w.get_label(), 'angle': abs(round(_round(w.theta2 - w.theta1), 4)), 'radius': _number(w.r)}
            for w in ax.patches if isinstance(w, mpl.Wedge)]
