"""The Plotly figure (built in Python) and plotly.js served from the installed package."""
import pytest
from django.contrib.staticfiles import finders

from leaderboard.figures import SHOWN_SYSTEMS, figure_payload, pass_rate_figure
from leaderboard.reference import reference_rows
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from leaderboard.staticfiles import PlotlyFinder, plotly_js_path


@pytest.mark.django_db
def test_figure_has_a_band_between_low_and_high_per_system(board_data):
    board = leaderboard_get(filters=LeaderboardFilters())
    figure = pass_rate_figure(board, reference_rows())
    traces = list(figure.data)
    position = 0
    for row in board.rows:
        low, high, line = traces[position : position + 3]
        position += 3
        assert low.fill is None and high.fill == "tonexty"  # fills down to the low edge just before it
        assert low.legendgroup == high.legendgroup == line.legendgroup == row.slug
        points = [n for n in board.n_values if n in row.by_n]
        assert list(line.x) == points
        assert list(line.y) == [row.by_n[n].pass1 for n in points]
        assert list(low.y) == [row.by_n[n].pass1_low for n in points]
        assert list(high.y) == [row.by_n[n].pass1_high for n in points]
        if len(points) >= 2 and row.fit is not None and row.fit.has_curve:
            fit = traces[position]  # its fitted difficulty curve follows, dotted, in its legend group
            position += 1
            assert fit.meta == "fit" and fit.legendgroup == row.slug and fit.line.dash == "dot"
    reported = traces[position:]
    assert len(reported) == len(reference_rows()) and all(t.visible == "legendonly" for t in reported)
    assert len(board.rows) <= SHOWN_SYSTEMS and all(t.visible is True for t in traces[:position])


@pytest.mark.django_db
def test_figure_payload_is_memoised_on_what_it_shows(board_data):
    board = leaderboard_get(filters=LeaderboardFilters())
    first = figure_payload(board, reference_rows())
    assert figure_payload(leaderboard_get(filters=LeaderboardFilters()), reference_rows()) is first
    assert figure_payload(leaderboard_get(filters=LeaderboardFilters(agent="react")), reference_rows()) is not first
    assert first["data"][0]["type"] == "scatter"


def test_plotly_js_is_found_as_a_static_file():
    found = finders.find("vendor/plotly.min.js")
    assert found == str(plotly_js_path())
    assert plotly_js_path().stat().st_size > 1_000_000
    assert PlotlyFinder().check() == []
    assert ("plotly.min.js", ) == tuple(path for path, _ in PlotlyFinder().list(None))
