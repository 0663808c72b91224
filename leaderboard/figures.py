"""Plotly figures, built in Python and handed to the page as JSON (plotly.js only draws them)."""
import functools
import hashlib
import html
import json

import plotly.graph_objects as go
from django.core.serializers.json import DjangoJSONEncoder
from plotly.colors import qualitative

from autoexperiment_site.caching import cache_quietly, cached
from leaderboard.curves import CurveFit
from leaderboard.metrics import Leaderboard
from leaderboard.pareto import frontier_step_line
from leaderboard.reference import ReferenceRow
from leaderboard.rules import TOLERANCES, tolerance_label
from leaderboard.selectors import ToleranceRow
from runs.benchmark.scoring import DEFAULT_RTOL

PALETTE = qualitative.Plotly + qualitative.D3 + qualitative.Dark24
# Drawn at first: the table's first rows. More overlapping bands would hide each other; the
# others are a legend click away.
SHOWN_SYSTEMS = 8


def plotly_text(value: object) -> str:
    """`value` as text Plotly shows as it is. Plotly reads labels (trace names, legend and hover
    text, titles, annotations) as a subset of HTML (<a href>, <b>, <br>, entities) and fills in
    %{...} placeholders in hover templates; model names and descriptions come from uploaders.
    Escaping &, < and > as entities, and % as &#37;, leaves no tag and no placeholder; Plotly turns
    the entities back into the characters when it draws. Every string the figures hand to Plotly
    passes through here."""
    return html.escape(str(value), quote=False).replace("%", "&#37;")


def _rgba(hex_color: str, alpha: float) -> str:
    hex_color = hex_color.lstrip("#")
    red, green, blue = (int(hex_color[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({red},{green},{blue},{alpha})"


def _system_label(row) -> str:
    label = f"{row.name} · {row.context}" + (f" · {row.config_label}" if row.config_label else "")
    # Only in the view that includes them (?unverified=1): said on the chart as on the table.
    return label if row.verified else f"{label} · unverified (reported numbers, not re-executed)"


def _figure_input(board: Leaderboard, reference: list[ReferenceRow]) -> tuple:
    """Everything the figure shows, as nested tuples: hashable, so figures can be memoised."""
    systems = []
    for row in board.rows:
        points = tuple(
            (n, row.by_n[n].pass1, row.by_n[n].pass1_low, row.by_n[n].pass1_high, row.by_n[n].samples)
            for n in board.n_values
            if n in row.by_n and row.by_n[n].pass1 is not None
        )
        systems.append((row.slug, plotly_text(_system_label(row)), points, _fit_line(row.fit, [point[0] for point in points])))
    references = tuple((plotly_text(ref.name), tuple(sorted(ref.pass1.items()))) for ref in reference)
    return tuple(systems), references


# Points of a fitted curve drawn between two n (its shape between the measured points).
FIT_POINTS_PER_N = 8


def _fit_line(fit: CurveFit | None, ns: list[int]) -> tuple:
    """The system's fitted difficulty curve over the n shown, as (n, pass rate) pairs, with its n50 as
    the hover says it: () without a curve or with fewer than two n shown."""
    if fit is None or not fit.has_curve or len(ns) < 2:
        return ()
    low, high = min(ns), max(ns)
    steps = FIT_POINTS_PER_N * (high - low)
    xs = [low + (high - low) * i / steps for i in range(steps + 1)]
    return (plotly_text(_fit_note(fit)), tuple((round(x, 4), round(fit.pass_rate(x), 6)) for x in xs))


def _fit_note(fit: CurveFit) -> str:
    if fit.n50 is None:
        return f"logistic fit; n50 {fit.label} ({fit.reason})"
    interval = ""
    if fit.n50_low is not None or fit.n50_high is not None:
        low = f"{fit.n50_low:.1f}" if fit.n50_low is not None else "open"
        high = f"{fit.n50_high:.1f}" if fit.n50_high is not None else "open"
        interval = f" (95% CI {low} to {high})"
    return f"logistic fit: n50 = {fit.label}{interval}"


def pass_rate_figure(board: Leaderboard, reference: list[ReferenceRow]) -> go.Figure:
    """Pass@1 against n, one line per system with its 95% interval shaded and its fitted difficulty
    curve (leaderboard.curves) dotted over it.

    Each system is three or four traces in one legend group: the interval's lower edge, its upper edge
    filled down to the lower one ("tonexty" fills to the trace just before), the line itself, and the
    fitted curve where there is one.
    The first SHOWN_SYSTEMS rows (in the table's order) are drawn; the others, and the paper's
    reported numbers (dashed grey lines), wait in the legend.
    """
    return _build(*_figure_input(board, reference))


def figure_payload(board: Leaderboard, reference: list[ReferenceRow]) -> dict:
    """The figure as plain JSON data for `json_script` (plotly's own encoder does the numbers).

    Memoised on what the figure shows (see `_memoised`), so an unchanged leaderboard costs no Plotly
    work; the result is shared between requests and must not be modified.
    """
    return _memoised("pass-rate", _figure_input(board, reference))


# Building a figure of a few hundred systems takes Plotly a good part of a second.
FIGURE_CACHE_SECONDS = 24 * 3600


def figure_cache_key(name: str, inputs: tuple) -> str:
    return f"leaderboard-figure:v2:{name}:{hashlib.sha256(repr(inputs).encode()).hexdigest()}"


class FigurePayload(dict):
    """A memoised figure's JSON data, with the text a page embeds it as (the `figure_script` filter):
    serialising a figure of a few hundred systems and escaping it for a <script> element costs more
    than the rest of the leaderboard's page, so the process that builds the figure does it once.
    `script_text` is escaped as django.utils.html.json_script escapes (<, > and & as \\u escapes)."""

    def __init__(self, data: dict):
        super().__init__(data)
        text = json.dumps(data, cls=DjangoJSONEncoder)
        self.script_text = text.replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")


@functools.lru_cache(maxsize=64)
def _memoised(name: str, inputs: tuple) -> FigurePayload:
    """`_BUILDERS[name](*inputs)`, memoised in this process and, across processes (gunicorn's
    workers, and the refresh job that builds the default view's figures ahead of the first request
    after a change: leaderboard.standings), in the shared cache under a digest of `inputs`."""
    key = figure_cache_key(name, inputs)
    payload = cached(key, what=f"the {name} figure")
    if payload is None:
        payload = FigurePayload(_BUILDERS[name](*inputs))
        cache_quietly(key, payload, FIGURE_CACHE_SECONDS, what=f"the {name} figure")
    return payload


def _payload(systems: tuple, references: tuple) -> dict:
    return json.loads(_build(systems, references).to_json())


def _build(systems: tuple, references: tuple) -> go.Figure:
    """The figure; every label in `systems` and `references` is already plotly_text."""
    traces = []
    for position, (slug, label, points, fit) in enumerate(systems):
        if not points:
            continue
        color = PALETTE[position % len(PALETTE)]
        ns = [point[0] for point in points]
        visible = True if position < SHOWN_SYSTEMS else "legendonly"
        common = {"x": ns, "legendgroup": slug, "visible": visible}
        traces.append(go.Scatter(
            y=[point[2] for point in points], mode="lines", line={"width": 0, "color": color},
            showlegend=False, hoverinfo="skip", **common,
        ))
        traces.append(go.Scatter(
            y=[point[3] for point in points], mode="lines", line={"width": 0, "color": color},
            fill="tonexty", fillcolor=_rgba(color, 0.15), showlegend=False, hoverinfo="skip", **common,
        ))
        traces.append(go.Scatter(
            y=[point[1] for point in points],
            customdata=[[point[2], point[3], point[4]] for point in points],
            mode="lines+markers",
            name=label,
            line={"color": color, "width": 2},
            marker={"size": 7},
            hovertemplate=(
                f"{label}<br>n=%{{x}}: Pass@1 %{{y:.1%}}<br>95% CI %{{customdata[0]:.1%}} to %{{customdata[1]:.1%}}"
                "<br>%{customdata[2]} samples<extra></extra>"
            ),
            **common,
        ))
        if fit:
            traces.append(_fit_trace(slug, label, fit, color, visible))
    for name, pass1 in references:
        if not pass1:
            continue
        traces.append(go.Scatter(
            x=[n for n, _ in pass1], y=[percent / 100 for _, percent in pass1], mode="lines+markers",
            name=f"Paper (reported): {name}",
            line={"color": "#888888", "dash": "dash", "width": 1.5}, marker={"symbol": "diamond-open", "size": 8},
            visible="legendonly", legendgroup=f"reference-{name}",
            hovertemplate=f"{name}, reported in the paper (upstream suite)<br>n=%{{x}}: Pass@1 %{{y:.1%}}<extra></extra>",
        ))
    return go.Figure(
        data=traces,
        layout=_layout(
            height=460,
            xaxis={"title": {"text": plotly_text("n (functions masked)")}, "dtick": 1, "tickformat": "d"},
            yaxis={"title": {"text": plotly_text("Pass@1 (shaded: 95% CI)")}, "tickformat": ".0%", "rangemode": "tozero"},
        ),
    )


def _fit_trace(slug: str, label: str, fit: tuple, color: str, visible) -> go.Scatter:
    """A fitted difficulty curve (from `_fit_line`), dotted, in its system's legend group."""
    note, curve = fit
    return go.Scatter(
        x=[x for x, _ in curve], y=[y for _, y in curve], mode="lines", line={"color": color, "width": 1.5, "dash": "dot"},
        legendgroup=slug, visible=visible, showlegend=False, meta="fit",
        hovertemplate=f"{label}<br>{note}<br>n=%{{x:.2f}}: fitted %{{y:.1%}}<extra></extra>",
    )


_AXIS = {"gridcolor": "#e6e6e6", "linecolor": "#999999", "zeroline": False, "ticks": "outside"}


def _layout(*, height: int, xaxis: dict, yaxis: dict, **more) -> dict:
    """The figures' shared layout. A light layout of our own instead of a named template:
    validating "plotly_white" costs more than building all the traces."""
    return {
        "template": "none",
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"family": "system-ui, sans-serif", "size": 12, "color": "#1d1f21"},
        "xaxis": {**_AXIS, **xaxis},
        "yaxis": {**_AXIS, **yaxis},
        "legend": {"font": {"size": 11}},
        "hovermode": "closest",
        **more,
    }


def tolerance_figure_payload(rows: list[ToleranceRow]) -> dict:
    """The tolerance sensitivity as plain JSON data for `json_script`: Pass@1 against the relative
    tolerance (log scale), one line per n, the rule marked. Memoised like `figure_payload`."""
    curves = tuple(
        (row.n, row.samples, tuple((t, value) for t, value in zip(TOLERANCES, row.pass1) if value is not None))
        for row in rows
    )
    return _tolerance_payload(curves)


@functools.lru_cache(maxsize=64)
def _tolerance_payload(curves: tuple) -> dict:
    traces = []
    for position, (n, samples, points) in enumerate(curves):
        if not points:
            continue
        label = plotly_text(f"n = {n}")
        traces.append(go.Scatter(
            x=[t for t, _ in points], y=[value for _, value in points], mode="lines+markers", name=label,
            line={"color": PALETTE[position % len(PALETTE)], "width": 2}, marker={"size": 7},
            hovertemplate=f"{label}, {samples} samples<br>tolerance %{{x:.1%}}: Pass@1 %{{y:.1%}}<extra></extra>",
        ))
    figure = go.Figure(
        data=traces,
        layout=_layout(
            height=380,
            xaxis={"type": "log", "title": {"text": plotly_text("relative tolerance (log scale; the rule: 5%)")},
                   "tickvals": list(TOLERANCES), "ticktext": [plotly_text(tolerance_label(t)) for t in TOLERANCES]},
            yaxis={"title": {"text": plotly_text("Pass@1")}, "tickformat": ".0%", "rangemode": "tozero"},
            # The rule, where this curve meets the leaderboard's Pass@1.
            shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": DEFAULT_RTOL, "x1": DEFAULT_RTOL, "y0": 0,
                     "y1": 1, "line": {"color": "#888888", "dash": "dash", "width": 1}}],
        ),
    )
    return json.loads(figure.to_json())


# --- a system's difficulty curve ---------------------------------------------------------------------


def curve_figure_payload(row) -> dict | None:
    """A system's page: its Pass@1 by n (95% interval bars) with its fitted difficulty curve dotted over
    it and n50 marked (leaderboard.curves). None without a point to draw. Plain JSON data for
    `json_script`, memoised on what it shows."""
    points = tuple(
        (n, metrics.pass1, metrics.pass1_low, metrics.pass1_high, metrics.samples)
        for n, metrics in sorted(row.by_n.items()) if metrics.pass1 is not None
    )
    if not points:
        return None
    fit = row.fit
    line = _fit_line(fit, [point[0] for point in points])
    marker = (fit.n50, fit.n50_low, fit.n50_high) if fit is not None and fit.n50 is not None else None
    return _curve_payload(plotly_text(_system_label(row)), points, line, marker)


@functools.lru_cache(maxsize=64)
def _curve_payload(label: str, points: tuple, fit: tuple, n50: tuple | None) -> dict:
    color = PALETTE[0]
    traces = [go.Scatter(
        x=[point[0] for point in points], y=[point[1] for point in points], mode="markers", name=plotly_text("Pass@1"),
        marker={"color": color, "size": 9},
        error_y={"type": "data", "symmetric": False,
                 "array": [high - value if high is not None else 0 for _, value, _, high, _ in points],
                 "arrayminus": [value - low if low is not None else 0 for _, value, low, _, _ in points],
                 "color": _rgba(color, 0.6), "thickness": 1.5, "width": 4},
        customdata=[[point[2], point[3], point[4]] for point in points],
        hovertemplate=(f"{label}<br>n=%{{x}}: Pass@1 %{{y:.1%}}<br>95% CI %{{customdata[0]:.1%}} to %{{customdata[1]:.1%}}"
                       "<br>%{customdata[2]} samples<extra></extra>"),
    )]
    shapes = []
    if fit:
        trace = _fit_trace("fit", label, fit, color, True)
        trace.update(name=plotly_text("logistic fit"), showlegend=True)
        traces.append(trace)
    if n50 is not None:
        value, low, high = n50
        # The interval as a band where both ends are bounded, n50 itself as a dashed line.
        if low is not None and high is not None:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": low, "x1": high, "y0": 0, "y1": 1,
                           "fillcolor": _rgba("#888888", 0.12), "line": {"width": 0}, "layer": "below"})
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": value, "x1": value, "y0": 0, "y1": 1,
                       "line": {"color": "#888888", "dash": "dash", "width": 1}})
    figure = go.Figure(
        data=traces,
        layout=_layout(
            height=380,
            xaxis={"title": {"text": plotly_text("n (functions masked)" + (" · dashed: n50, shaded: its 95% CI" if n50 else ""))},
                   "dtick": 1, "tickformat": "d"},
            yaxis={"title": {"text": plotly_text("Pass@1 (bars: 95% CI)")}, "tickformat": ".0%", "range": [0, 1.02]},
            shapes=shapes + [{"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": 0.5, "y1": 0.5,
                              "line": {"color": "#cccccc", "width": 1}}],
        ),
    )
    return json.loads(figure.to_json())


# --- cost against accuracy ----------------------------------------------------------------------------

FRONTIER_COLOR = "#1d1f21"


def _cost_figure_input(board: Leaderboard) -> tuple:
    """What the cost figure shows, as nested tuples (hashable, so the figure can be memoised): per n
    with a placed system, its placed systems (colour position as in the pass-rate figure, label,
    cost, Pass@1 and interval, samples, on the frontier) and the frontier's step line."""
    position = {row.slug: index for index, row in enumerate(board.rows)}
    rows = {row.slug: row for row in board.rows}
    charts = []
    for chart in board.cost_accuracy:
        if not chart.placed:
            continue
        on_frontier = chart.frontier_keys
        points = []
        for point in chart.placed:
            metrics = rows[point.key].by_n[chart.n]
            points.append((
                point.key, position[point.key], plotly_text(_system_label(rows[point.key])), point.cost, point.pass1,
                metrics.pass1_low, metrics.pass1_high, metrics.samples, point.key in on_frontier,
            ))
        costs, pass1s = frontier_step_line(chart.frontier)
        charts.append((chart.n, tuple(points), tuple(costs), tuple(pass1s)))
    return tuple(charts)


def cost_figure_payload(board: Leaderboard) -> dict | None:
    """Pass@1 against mean cost per attempt, one n at a time (buttons switch n; the first shown),
    with the Pareto frontier as a step line and its systems ringed. Systems of unknown cost are
    not in it (the page lists them under the chart). None when no system is placed at any n.
    Plain JSON data for `json_script`, memoised like `figure_payload`."""
    charts = _cost_figure_input(board)
    return _memoised("cost-accuracy", (charts,)) if charts else None


def _cost_payload(charts: tuple) -> dict:
    traces, groups = [], []
    for index, (n, points, frontier_costs, frontier_pass1s) in enumerate(charts):
        first = len(traces)
        shown = index == 0
        # The step line first, so the systems' markers are drawn over it.
        traces.append(go.Scatter(
            x=list(frontier_costs), y=list(frontier_pass1s), mode="lines", line_shape="hv",
            name=plotly_text("Pareto frontier"), legendgroup=f"frontier-n{n}", visible=shown,
            line={"color": FRONTIER_COLOR, "width": 1.5, "dash": "dot"}, hoverinfo="skip",
        ))
        for slug, position, label, cost, pass1, low, high, samples, on_frontier in points:
            color = PALETTE[position % len(PALETTE)]
            note = "<br>on the Pareto frontier" if on_frontier else ""
            traces.append(go.Scatter(
                x=[cost], y=[pass1], mode="markers", name=label, legendgroup=slug, visible=shown,
                customdata=[[low, high, samples]],
                error_y={"type": "data", "symmetric": False, "array": [high - pass1 if high is not None else 0],
                         "arrayminus": [pass1 - low if low is not None else 0], "color": _rgba(color, 0.5),
                         "thickness": 1, "width": 0},
                marker={"color": color, "size": 12 if on_frontier else 9,
                        "line": {"color": FRONTIER_COLOR if on_frontier else "white", "width": 2 if on_frontier else 1}},
                hovertemplate=(
                    f"{label}<br>n={n}: Pass@1 %{{y:.1%}} (95% CI %{{customdata[0]:.1%}} to %{{customdata[1]:.1%}})"
                    f"<br>$%{{x:.4f}} per attempt, %{{customdata[2]}} samples{note}<extra></extra>"
                ),
            ))
        groups.append((n, first, len(traces)))
    buttons = [
        {"label": plotly_text(f"n = {n}"), "method": "restyle",
         "args": [{"visible": [start <= i < end for i in range(len(traces))]}]}
        for n, start, end in groups
    ]
    more = {}
    if len(buttons) > 1:
        more["updatemenus"] = [{"type": "buttons", "direction": "right", "active": 0, "buttons": buttons, "showactive": True,
                                "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom", "pad": {"r": 4, "t": 0},
                                "font": {"size": 11}}]
    layout = _layout(
        height=460,
        xaxis={"title": {"text": plotly_text("mean cost per attempt (USD)" + ("" if more else f", n = {groups[0][0]}"))},
               "tickprefix": "$", "rangemode": "tozero"},
        yaxis={"title": {"text": plotly_text("Pass@1 (bars: 95% CI)")}, "tickformat": ".0%", "rangemode": "tozero"},
        **more,
    )
    if more:
        layout["margin"] = {**layout["margin"], "t": 60}
    figure = go.Figure(data=traces, layout=layout)
    return json.loads(figure.to_json())


_BUILDERS = {"pass-rate": _payload, "cost-accuracy": _cost_payload}
