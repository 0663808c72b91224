"""The leaderboard table's rows as HTML, each rendered once per computation of its numbers and shared
between processes: rendering a few hundred rows with Django's templates is most of a leaderboard
request's time otherwise, growing with the systems shown.

A row's HTML is fully determined by its system (the slug), the computation of its numbers (the
standing's `refreshed_at`: numbers are only ever replaced by leaderboard.standings, which sets it),
whether it is marked stale, where it is on the Pareto frontier (which depends on the other rows
shown), what the filters ask to show (verified only, n range, tolerance), the address prefix its links
are under and the row template itself.
The cache key is made of exactly these, so a key never names two different rows; sorting, or a
change to another system, reuses every row already rendered.
"""
from __future__ import annotations

import functools
import hashlib

from django.template.loader import get_template
from django.urls import get_script_prefix
from django.utils.safestring import SafeString, mark_safe

from autoexperiment_site.caching import cache_quietly_many, cached_many
from leaderboard.metrics import Leaderboard, SystemRow
from leaderboard.rules import tolerance_label

ROW_TEMPLATE = "leaderboard/_row.html"
ROW_CACHE_SECONDS = 24 * 3600


@functools.cache
def _row_template():
    """The row template and a digest of its source: a new template (a deployment) never reads old rows."""
    template = get_template(ROW_TEMPLATE)
    return template, hashlib.sha256(template.template.source.encode()).hexdigest()[:16]


def table_n_values(board: Leaderboard, reference: list) -> list[int]:
    """The table's columns by n: every n measured or reported, so the paper's numbers line up with ours."""
    return sorted(set(board.n_values) | {n for ref in reference for n in (*ref.pass1, *ref.passk)})


def leaderboard_rows_html(board: Leaderboard, n_values: list[int]) -> list[SafeString]:
    """The rows of `board` with a cell group for each of `n_values`, in the board's order."""
    template, template_digest = _row_template()
    filters = board.filters
    pickable = len(board.rows) > 1  # the "tick to compare" boxes, only when there is something to compare
    view = (template_digest, get_script_prefix(), filters.verified_only, filters.n_min, filters.n_max, filters.tolerance,
            tuple(n_values), pickable)
    keys = [_row_key(view, row) for row in board.rows]
    found = cached_many(keys, what="the leaderboard's rows")
    context = {"pickable": pickable,
               "tolerance_label": tolerance_label(filters.tolerance) if filters.tolerance is not None else None}
    rendered = {
        key: template.render({**context, "row": row, "cells": row.cells(n_values)})
        for key, row in zip(keys, board.rows) if key not in found
    }
    if rendered:
        cache_quietly_many(rendered, ROW_CACHE_SECONDS, what="the leaderboard's rows")
    rows = {**found, **rendered}
    return [mark_safe(rows[key]) for key in keys]


def _row_key(view: tuple, row: SystemRow) -> str:
    frontier = tuple(n for n, metrics in row.by_n.items() if metrics.pareto_frontier)
    identity = repr((view, row.slug, row.refreshed_at.isoformat() if row.refreshed_at else None, row.stale, frontier))
    return f"leaderboard-row:{hashlib.sha256(identity.encode()).hexdigest()}"
