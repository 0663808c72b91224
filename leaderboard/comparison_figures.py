"""The paired comparison's figure: Pass@1 of A minus B per n with its 95% interval, zero marked."""
import functools
import json

import plotly.graph_objects as go

from leaderboard.comparison import Comparison
from leaderboard.figures import PALETTE, _layout, plotly_text


def comparison_figure_payload(comparison: Comparison) -> dict | None:
    """The figure as plain JSON data for `json_script` (None: no n has shared samples). Memoised on
    what it shows; the result is shared between requests and must not be modified."""
    points = tuple(
        (row.n, row.difference, row.low, row.high, row.p_value, row.shared)
        for row in comparison.by_n
        if row.difference is not None
    )
    if not points:
        return None
    return _payload(points, plotly_text(comparison.a.name), plotly_text(comparison.b.name))


@functools.lru_cache(maxsize=64)
def _payload(points: tuple, name_a: str, name_b: str) -> dict:
    ns = [point[0] for point in points]
    trace = go.Scatter(
        x=ns,
        y=[point[1] for point in points],
        error_y={
            "type": "data", "symmetric": False,
            "array": [point[3] - point[1] for point in points],
            "arrayminus": [point[1] - point[2] for point in points],
            "color": PALETTE[0], "thickness": 1.5, "width": 6,
        },
        customdata=[[point[2], point[3], point[4], point[5]] for point in points],
        mode="lines+markers",
        name=plotly_text("A − B"),
        line={"color": PALETTE[0], "width": 2},
        marker={"size": 8},
        hovertemplate=(
            "n=%{x}: Pass@1 A − B %{y:+.1%}<br>95% CI %{customdata[0]:+.1%} to %{customdata[1]:+.1%}"
            "<br>p = %{customdata[2]:.3g}, %{customdata[3]} shared samples<extra></extra>"
        ),
    )
    figure = go.Figure(
        data=[trace],
        layout=_layout(
            height=360,
            showlegend=False,
            xaxis={"title": {"text": plotly_text("n (functions masked)")}, "dtick": 1, "tickformat": "d"},
            yaxis={"title": {"text": plotly_text("Pass@1 difference, A − B (bars: 95% CI)")}, "tickformat": "+.0%"},
            # No difference: above the line A is better, below B.
            shapes=[{"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": 0, "y1": 0,
                     "line": {"color": "#888888", "dash": "dash", "width": 1}}],
            annotations=[
                {"xref": "paper", "yref": "paper", "x": 0, "y": 1.06, "showarrow": False, "xanchor": "left",
                 "text": f"A: {name_a}  ·  B: {name_b}", "font": {"size": 11, "color": "#555555"}},
            ],
        ),
    )
    return json.loads(figure.to_json())
