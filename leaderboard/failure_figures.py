"""The system page's failure-analysis figure: the outcome split by n as stacked bars (shares of the
counted attempts), with the first-run crash rate and the recovery rate as lines, and the paper's
GPT-4o split at n = 1 as a bar of its own, marked as reported."""
import functools
import json

import plotly.graph_objects as go

from leaderboard.failure_analysis import PART_ROWS, FailureAnalysis
from leaderboard.figures import PALETTE, _layout, plotly_text

# One colour per outcome, the same on every system's page.
OUTCOME_COLORS = {
    "passed": "#2a9d8f", "wrong_answer": "#e76f51", "no_answer_any": "#f4a261", "reexecution_failed": "#9b2226",
    "budget_exhausted": "#6c757d", "out_of_scope": "#8e7dbe", "unclassified": "#d9d9d9",
}


def failure_figure_payload(analysis: FailureAnalysis) -> dict | None:
    """The figure as plain JSON data for `json_script` (None: no counted attempt). Memoised on what
    it shows; the result is shared between requests and must not be modified."""
    if not analysis.counted_total:
        return None
    columns = [n for n in analysis.n_values if analysis.counted.get(n)]
    bars = tuple(
        (row.key, plotly_text(row.label), tuple((cell.n, cell.share, cell.count) for cell in row.cells if cell.n in columns),
         row.paper)
        for row in analysis.outcomes
        if row.key not in PART_ROWS and row.total
    )
    lines = tuple(
        (plotly_text(label), tuple((stats.n, getattr(stats, name), count(stats)) for stats in analysis.trajectories
                                   if getattr(stats, name) is not None))
        for label, name, count in (
            ("first experiment run crashed (of attempts that ran one)", "crash_share", lambda s: s.ran),
            ("of those, reached a working run", "recovery_share", lambda s: s.crashed),
        )
    )
    reference = (plotly_text(analysis.paper.label), analysis.paper_crash_share, analysis.paper_recovery_share)
    return _payload(tuple(columns), bars, lines, reference)


def _column(n) -> str:
    return f"n = {n}"


@functools.lru_cache(maxsize=64)
def _payload(columns: tuple, bars: tuple, lines: tuple, reference: tuple) -> dict:
    paper_label, paper_crash, paper_recovery = reference
    categories = [_column(n) for n in columns] + [paper_label]
    traces = []
    for key, label, cells, paper_share in bars:
        x = [_column(n) for n, _, _ in cells]
        y = [share for _, share, _ in cells]
        counts = [count for _, _, count in cells]
        if paper_share is not None:
            x.append(paper_label)
            y.append(paper_share)
            counts.append(None)
        traces.append(go.Bar(
            x=x, y=y, name=label, customdata=counts, marker={"color": OUTCOME_COLORS.get(key, "#999999")},
            hovertemplate=f"{label}<br>%{{x}}: %{{y:.1%}} (%{{customdata}} attempts)<extra></extra>",
        ))
    for position, (label, points) in enumerate(lines):
        if not points:
            continue
        traces.append(go.Scatter(
            x=[_column(n) for n, _, _ in points], y=[value for _, value, _ in points], customdata=[c for _, _, c in points],
            mode="lines+markers", name=label, line={"color": PALETTE[position % len(PALETTE)], "width": 2},
            marker={"size": 8}, hovertemplate=f"{label}<br>%{{x}}: %{{y:.1%}} of %{{customdata}}<extra></extra>",
        ))
    traces.append(go.Scatter(
        x=[paper_label, paper_label], y=[paper_crash, paper_recovery], mode="markers",
        name=plotly_text("paper: first run crashed, recovered"), marker={"symbol": "diamond-open", "size": 10, "color": "#333333"},
        text=[plotly_text("first run crashed"), plotly_text("recovered to working code")],
        hovertemplate=f"{paper_label}, reported<br>%{{text}}: %{{y:.1%}}<extra></extra>",
    ))
    figure = go.Figure(
        data=traces,
        layout=_layout(
            height=420, barmode="stack",
            xaxis={"type": "category", "categoryorder": "array", "categoryarray": categories,
                   "title": {"text": plotly_text("n (functions masked)")}},
            yaxis={"title": {"text": plotly_text("share of attempts")}, "tickformat": ".0%", "range": [0, 1.02]},
        ),
    )
    return json.loads(figure.to_json())
