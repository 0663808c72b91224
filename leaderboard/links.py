"""Links from the leaderboard's pages to others (a system, a suite, an attempt's replay, the attempts
explorer), made once per page: one reverse() then string substitution per row, since reversing per
row would cost more than the query. A page that is not wired up gives no link rather than an error."""
from __future__ import annotations

from urllib.parse import urlencode

from django.urls import NoReverseMatch, reverse


def url_or_none(name: str, argument) -> str | None:
    """The URL `name` with its one argument; None when that page is not wired up (yet)."""
    try:
        return reverse(name, args=[argument])
    except NoReverseMatch:
        return None


def url_maker(name: str, marker):
    """A function from the one argument of URL `name` to the URL (None if that page is not wired up).
    `marker`: an argument the URL takes that appears nowhere else in it."""
    template = url_or_none(name, marker)
    if template is None:
        return lambda value: None
    head, _, tail = template.rpartition(str(marker))
    return lambda value: f"{head}{value}{tail}"


def attempt_url_maker():
    """A function from attempt pk to its trajectory page URL (None if that page is not wired up)."""
    return url_maker("replay:attempt", 987654321)


def explore_url_maker(slug: str):
    """A function from (paper, sample id) to the attempts explorer showing the system's attempts at
    that sample (None while the explorer is not wired up)."""
    try:
        base = reverse("leaderboard:explore")
    except NoReverseMatch:
        return lambda paper, sample_id: None
    return lambda paper, sample_id: f"{base}?{urlencode({'system': slug, 'paper': paper, 'sample': sample_id})}"
