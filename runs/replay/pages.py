"""Reading one page of a stored trajectory without loading the rest of it.

A replay request needs the trajectory's header, the steps of one page, which steps anywhere in it
are errors (for "first error" and stepping from error to error across pages) and the head of the
final patch. On Postgres the database slices the stored JSON: the web process decodes one page of
steps, however long the trajectory is (trajectories stored before the upload limits existed may
hold 250,000 steps). Other databases (SQLite, for local use) get the same answer by loading the
whole document, which the upload limits keep bounded for anything stored since.

Which steps are errors needs a look at every step (its fields and observation), the one part of
a request whose cost grows with the trajectory: on Postgres it is computed by a second query and
kept in the cache under the attempt row's version (its `xmin` and `ctid`: together they change
with every update of the row, even two in one transaction), so a trajectory is scanned once, not
on every page view. Without a cache it is computed
every time; the answer is the same.

`StepMarks` is what decides whether a step is an error (`error_kind`): the step's `error`,
`traceback`, `exit_code` and `timed_out` fields and whether a Python traceback appears anywhere in
its observation. The status line a command's observation ends with ("[exit code 1; ...]") is text
for the model and is never read back: the program that ran may print one too. Steps stored
before `exit_code` existed show no exit status.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from autoexperiment_site.caching import cache_quietly, cached
from runs.analysis.marks import (  # noqa: F401 - re-exported: the replay's names for them
    TRACEBACK_TEXT,
    StepMarks,
    error_kind,
    exit_code_of,
    step_marks,
)
from runs.models import Attempt

ERRORS_CACHE_SECONDS = 7 * 24 * 3600


@dataclass
class TrajectoryPage:
    """A window onto an attempt's stored trajectory."""

    exists: bool  # False: no trajectory stored
    head: Any = None  # the document without "steps" and "final_patch" (normally a dict)
    step_count: int = 0
    first: int = 1  # number of steps[0]
    steps: list = field(default_factory=list)  # raw step values, numbers first, first + 1, ...
    errors: list[int] = field(default_factory=list)  # error steps among the first `errors_limit`
    patch_head: str = ""  # the first `patch_chars` characters of the final patch
    patch_chars: int = 0  # its whole length in characters


# Python's truthiness of a JSON value, in SQL (NULL: the key is absent).
_TRUTHY = "coalesce(({0}) NOT IN ('null'::jsonb, 'false'::jsonb, '0'::jsonb, '\"\"'::jsonb, '[]'::jsonb, '{{}}'::jsonb), false)"

# Each stored value is read (decompressed) once: jsonb_path_query_first(..., '$') makes an
# in-memory copy and OFFSET 0 keeps the subquery a separate step, so nothing above it is evaluated
# again against the stored value; JSON paths reach into "steps" without copying it.
_POSTGRES_PAGE = """
SELECT t.head::text,
       t.step_count,
       CASE WHEN t.is_array THEN jsonb_path_query_array(t.doc, '$.steps[$first to $last]',
                                                        jsonb_build_object('first', %(first)s, 'last', %(last)s))
            ELSE '[]' END::text,
       CASE WHEN t.attempt_patch_chars > 0 THEN t.attempt_patch ELSE left(t.trajectory_patch, %(patch_chars)s) END,
       CASE WHEN t.attempt_patch_chars > 0 THEN t.attempt_patch_chars ELSE coalesce(char_length(t.trajectory_patch), 0) END,
       t.doc IS NOT NULL AND jsonb_typeof(t.doc) <> 'null',
       t.version
  FROM (SELECT d.doc, d.is_array, d.version, d.attempt_patch, d.attempt_patch_chars,
               CASE WHEN jsonb_typeof(d.doc) = 'object' THEN d.doc - 'steps' - 'final_patch' ELSE d.doc END AS head,
               CASE WHEN d.is_array THEN (jsonb_path_query_first(d.doc, '$.steps.size()'))::int ELSE 0 END AS step_count,
               CASE WHEN d.attempt_patch_chars = 0 AND jsonb_typeof(d.doc) = 'object' THEN d.doc ->> 'final_patch' END
                 AS trajectory_patch
          FROM (SELECT x.*, coalesce(jsonb_path_query_first(x.doc, '$.steps.type()') = '"array"', false) AS is_array
                  FROM (SELECT jsonb_path_query_first(a.trajectory, '$') AS doc, a.xmin::text || '/' || a.ctid::text AS version,
                               left(a.final_patch, %(patch_chars)s) AS attempt_patch,
                               char_length(a.final_patch) AS attempt_patch_chars
                          FROM {table} AS a
                         WHERE a.id = %(id)s
                        OFFSET 0) AS x
                OFFSET 0) AS d
        OFFSET 0) AS t
"""

# The marks of the steps that may be errors, if the row is still at `version`; `error_kind` has the
# last word. An exit code that is not a JSON number reads as none (NULL), as `exit_code_of` reads it.
_POSTGRES_MARKS = """
SELECT coalesce(jsonb_agg(jsonb_build_array(m.n, m.error, m.traceback, m.exit_code, m.timed_out, m.in_output)
                          ORDER BY m.n), '[]')::text
  FROM (SELECT e.n, f.error, f.traceback, f.exit_code, f.timed_out, f.in_output
          FROM {table} AS a
               CROSS JOIN LATERAL jsonb_path_query(a.trajectory, 'strict $.steps[*]') WITH ORDINALITY AS e(s, n)
               CROSS JOIN LATERAL (SELECT {error} AS error, {traceback} AS traceback, {timed_out} AS timed_out,
                                          CASE WHEN jsonb_typeof(e.s -> 'exit_code') = 'number' THEN e.s -> 'exit_code' END
                                            AS exit_code,
                                          strpos(e.s ->> 'observation', %(traceback_text)s) > 0 AS in_output) AS f
         WHERE a.id = %(id)s AND a.xmin::text || '/' || a.ctid::text = %(version)s
           AND jsonb_path_query_first(a.trajectory, '$.steps.type()') = '"array"'
           AND e.n <= %(errors_limit)s
        OFFSET 0) AS m
 WHERE m.error OR m.traceback OR m.in_output OR m.timed_out OR m.exit_code <> '0'::jsonb
"""


def trajectory_page(*, attempt_id: int, first: int, count: int, errors_limit: int, patch_chars: int) -> TrajectoryPage:
    """Steps `first`..`first + count - 1` (1-based) of the attempt's trajectory, its header, its
    step count, the numbers of its error steps among the first `errors_limit` steps, and the first
    `patch_chars` characters of the final patch (the attempt's, else the trajectory's).
    Raises Attempt.DoesNotExist."""
    if connection.vendor != "postgresql":
        return trajectory_page_in_python(attempt_id=attempt_id, first=first, count=count, errors_limit=errors_limit,
                                         patch_chars=patch_chars)
    table = connection.ops.quote_name(Attempt._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(_POSTGRES_PAGE.format(table=table), {
            "id": attempt_id, "first": first - 1, "last": first - 2 + count, "patch_chars": patch_chars,
        })
        row = cursor.fetchone()
    if row is None:
        raise Attempt.DoesNotExist(f"no attempt {attempt_id}")
    head, step_count, steps, patch_head, patch_length, present, version = row
    page = TrajectoryPage(exists=bool(present), first=first, patch_head=patch_head or "", patch_chars=patch_length or 0)
    if not present:
        return page
    page.head = json.loads(head)
    page.step_count = step_count or 0
    page.steps = json.loads(steps) if count > 0 else []
    if page.step_count and errors_limit > 0:
        page.errors = _postgres_errors(attempt_id, version, errors_limit)
    return page


def _postgres_errors(attempt_id: int, version: str, errors_limit: int) -> list[int]:
    # "/2": error steps are read from the exit_code field since then, no longer from the text.
    key = f"replay-errors/2:{connection.settings_dict['NAME']}:{attempt_id}:{version}:{errors_limit}"
    stored = cached(key, what="replay error steps")
    if stored is not None:
        return stored
    query = _POSTGRES_MARKS.format(
        table=connection.ops.quote_name(Attempt._meta.db_table),
        error=_TRUTHY.format("e.s -> 'error'"),
        traceback=_TRUTHY.format("e.s -> 'traceback'"),
        timed_out=_TRUTHY.format("e.s -> 'timed_out'"),
    )
    with connection.cursor() as cursor:
        cursor.execute(query, {"id": attempt_id, "version": version, "traceback_text": TRACEBACK_TEXT,
                               "errors_limit": errors_limit})
        row = cursor.fetchone()
    marks = [StepMarks(int(n), bool(error), bool(traceback), exit_code_of(exit_code), bool(timed_out), bool(in_output))
             for n, error, traceback, exit_code, timed_out, in_output in json.loads(row[0])]
    errors = [mark.number for mark in marks if error_kind(mark)]
    cache_quietly(key, errors, ERRORS_CACHE_SECONDS, what="replay error steps")
    return errors


def trajectory_page_in_python(*, attempt_id: int, first: int, count: int, errors_limit: int, patch_chars: int) -> TrajectoryPage:
    """`trajectory_page` computed from the whole stored document (any database)."""
    data, final_patch = Attempt.objects.values_list("trajectory", "final_patch").get(pk=attempt_id)
    patch = final_patch or ""
    if not patch and isinstance(data, dict) and isinstance(data.get("final_patch"), str):
        patch = data["final_patch"]
    page = TrajectoryPage(exists=data is not None, first=first, patch_head=patch[:patch_chars], patch_chars=len(patch))
    if data is None:
        return page
    steps = data.get("steps") if isinstance(data, dict) else None
    steps = steps if isinstance(steps, list) else []
    page.head = {key: value for key, value in data.items() if key not in ("steps", "final_patch")} if isinstance(data, dict) else data
    page.step_count = len(steps)
    page.steps = steps[first - 1 : first - 1 + count] if count > 0 else []
    candidates = (step_marks(number, step) for number, step in enumerate(steps[:errors_limit], start=1))
    page.errors = [marks.number for marks in candidates if error_kind(marks)]
    return page
