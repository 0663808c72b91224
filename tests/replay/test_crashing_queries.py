"""Query parameters that used to reach int() and crash it: a digit that is not ASCII ("²" passes
str.isdigit) and 5,000 digits (past Python's int-string limit). Both are a 400 that says what to send."""
import pytest

from tests.replay.factories import make_attempt

HUGE = "9" * 5000


@pytest.mark.parametrize("value", ["²", HUGE], ids=["superscript-two", "5000-digits"])
def test_bad_numbers_are_a_400_with_a_message(db, client, value):
    attempt = make_attempt()
    compare = client.get("/attempts/compare/", {"a": value, "b": attempt.pk})
    assert compare.status_code == 400
    assert "Give two attempt ids to compare, as ?a=&lt;id&gt;&amp;b=&lt;id&gt;." in compare.content.decode()
    page = client.get(f"/attempts/{attempt.pk}/", {"page": value})
    assert page.status_code == 400
    assert "The page of steps must be a whole number from 1 up (?page=1)" in page.content.decode()
