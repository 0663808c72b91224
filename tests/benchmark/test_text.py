"""How JSON values and durations are written for people (runs.benchmark.text)."""
from decimal import Decimal

import pytest

from runs.benchmark.text import format_seconds, json_type, shorten_at_word


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "a boolean (true)"),
        (5, "an integer (5)"),
        (1.5, "a number (1.5)"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
        ("partial", 'a string ("partial")'),
        ("x" * 50, f'a string ("{"x" * 37}...")'),
        ([1], "a list"),
        ({"a": 1}, "an object"),
    ],
)
def test_json_type_names_the_type_and_a_short_value(value, text):
    assert json_type(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.5, "2.5 s"),
        (125, "2 min 05 s"),
        (3725, "1 h 02 min"),
        (Decimal("42"), "42.0 s"),  # database aggregates
        (None, "—"),
        ("", "—"),
        (True, "—"),
        (float("nan"), "—"),
    ],
)
def test_format_seconds(value, text):
    assert format_seconds(value) == text


@pytest.mark.parametrize(("text", "limit", "shown"), [
    ("Return the full dataset of weighted means", 20, "Return the full…"),  # never "Return the full-da"
    ("Return  the\nfull   dataset", 100, "Return the full dataset"),  # whitespace runs made single spaces
    ("short", 5, "short"),
    ("exactly ten", 11, "exactly ten"),
    ("cut right before a space here", 19, "cut right before a…"),  # a space just past the head: its last word is whole
    ("Supercalifragilistic expialidocious", 8, "Superca…"),  # a first word longer than the limit is cut
    ("Done, then more words follow", 8, "Done…"),  # no dangling comma before the ellipsis
])
def test_shorten_at_word_cuts_at_a_word_with_an_ellipsis(text, limit, shown):
    result = shorten_at_word(text, limit)
    assert result == shown
    assert len(result) <= limit
