"""Links into the replay: the URL of one step of an attempt's trajectory.

The replay shows `replay_bounds().steps_per_page` steps a page (runs.replay.presenters.Pager:
page p holds steps (p - 1) * per_page + 1 .. p * per_page), each anchored `#step-N`.
"""
from __future__ import annotations

from collections.abc import Callable

from django.urls import NoReverseMatch, reverse

from runs.limits import replay_bounds

_MARKER = 987654321


def step_page(step_number: int, per_page: int) -> int:
    """The replay page that shows step `step_number` (1-based)."""
    return (max(1, step_number) - 1) // max(1, per_page) + 1


def step_url_maker() -> Callable[[int, int | None], str | None]:
    """A function from (attempt pk, step number or None) to that step's replay URL,
    "/attempts/<pk>/?page=<page>#step-<n>" (step None: the replay's first page). Returns None
    for every attempt when the replay is not wired up. One reverse() for all the links a page
    makes, then string substitution."""
    try:
        template = reverse("replay:attempt", args=[_MARKER])
    except NoReverseMatch:
        return lambda pk, step=None: None
    head, _, tail = template.rpartition(str(_MARKER))
    per_page = replay_bounds().steps_per_page

    def url(pk: int, step: int | None = None) -> str:
        if step is None:
            return f"{head}{pk}{tail}"
        return f"{head}{pk}{tail}?page={step_page(step, per_page)}#step-{step}"

    return url
