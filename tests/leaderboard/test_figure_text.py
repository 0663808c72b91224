"""Every string the figure hands to Plotly is text: no tag Plotly would draw as a link or bold, no
%{...} placeholder its hover templates would fill in. (tests/browser/test_injection_browser.py
checks what Chromium draws.)"""
import html
from datetime import UTC, datetime

import pytest

from leaderboard.figures import figure_payload, plotly_text
from leaderboard.rules import LeaderboardFilters, canonical_config
from leaderboard.selectors import leaderboard_get
from runs.models import Paper, Sample, Suite
from tests.leaderboard.factories import PASS, make_attempt, make_run
from tests.support import standings_refreshed

LINK = '<a href="https://evil.example">x</a>'
NAMES = [LINK, "<b>bold</b><br>%{x} & %{customdata[0]}"]


@pytest.fixture
def hostile_systems(db):
    suite = Suite.objects.create(name="toy", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="p", title="A paper")
    sample = Sample.objects.create(paper=paper, sample_id="p_0", n=1)
    for name in NAMES:
        run = make_run(suite, model=name, config={"label": name}, n_values=(1,), finished=datetime(2026, 1, 1, tzinfo=UTC))
        make_attempt(run, sample, 0, PASS)
    standings_refreshed()


def strings(value):
    """Every string in a JSON value, with where it is."""
    stack = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((inner, f"{path}.{key}") for key, inner in item.items())
        elif isinstance(item, list):
            stack.extend((inner, f"{path}[{index}]") for index, inner in enumerate(item))
        elif isinstance(item, str):
            yield path, item


def test_plotly_text():
    assert plotly_text(LINK) == '&lt;a href="https://evil.example"&gt;x&lt;/a&gt;'
    assert plotly_text("100% & <br>") == "100&#37; &amp; &lt;br&gt;"
    assert html.unescape(plotly_text(NAMES[1])) == NAMES[1]


def test_labels_reach_plotly_as_text(hostile_systems):
    payload = figure_payload(leaderboard_get(filters=LeaderboardFilters()), [])
    named = [trace for trace in payload["data"] if trace.get("name")]
    assert sorted(html.unescape(trace["name"]) for trace in named) == sorted(
        f"{name} · react · full · {canonical_config({'label': name})}" for name in NAMES
    )
    for path, text in strings(payload):
        if path.endswith(".hovertemplate"):
            # Our own template: its tags and placeholders only, the label escaped inside it.
            label = next(trace["name"] for trace in named if text.startswith(trace["name"] + "<br>"))
            text = text.removeprefix(label)
            assert "&lt;" not in text and "<a" not in text
        else:
            assert "<" not in text and "%{" not in text, (path, text)
