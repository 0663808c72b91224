"""The replay's reads: an attempt with what its page shows (one query; attempts of a hidden run
only for those who may see it, runs.visibility), the other attempts at its sample, whether it may
still record steps, its whole final patch for the download, and the original file of a trajectory
converted from another tool's. The pages of its trajectory are runs.replay.pages'."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.db.models.fields.json import KT
from django.urls import NoReverseMatch, reverse

from runs.analysis.gold_text import gold_redaction_for
from runs.analysis.public import GOLD_CODE_AGENTS
from runs.models import Attempt, TrajectorySource
from runs.replay.pages import trajectory_page
from runs.visibility import GoldAccess, runs_visible_q


def attempt_get_for_replay(*, pk: int, user=None) -> Attempt:
    """The attempt with its run, suite, sample and paper, in one query (Attempt.DoesNotExist otherwise).

    Attempts of a hidden run exist only for its owner and staff (runs.visibility). The original
    file of a converted trajectory comes along, without its content, for the page's link.
    """
    return (
        Attempt.objects.select_related("run", "run__suite", "sample", "sample__paper", "trajectory_source")
        .filter(runs_visible_q(user=user, prefix="run__"))
        # Read a page at a time by the replay (runs.replay.pages), never whole; the original file on download only.
        # held_out_scores: staff-only numbers no replay shows, not even loaded.
        .defer("trajectory", "final_patch", "trajectory_source__content", "held_out_scores")
        .get(pk=pk)
    )


def attempt_siblings(*, attempt: Attempt, user=None, limit: int = 50) -> QuerySet:
    """Other attempts at the same sample that `user` may see (for the compare links), newest runs
    first; light columns only."""
    return (
        Attempt.objects.filter(runs_visible_q(user=user, prefix="run__"), sample_id=attempt.sample_id)
        .exclude(pk=attempt.pk)
        .select_related("run")
        .only("pk", "index", "status", "passed", "mismatch", "run__id", "run__agent", "run__model")
        .order_by("-run__created_at", "-run_id", "index")[:limit]
    )


def attempt_is_live(attempt: Attempt) -> bool:
    """Queued or running: its trajectory may still grow (a worker stores it as the agent works)."""
    return attempt.status in (Attempt.QUEUED, Attempt.RUNNING)


@dataclass(frozen=True)
class LiveState:
    """Where a live attempt stands, for its page's script: counts only, no text (the steps' bodies
    come from attempt_step_bodies, under the replay's gold rule)."""

    status: str
    live: bool
    steps: int
    tries: int


def attempt_live_state(*, attempt: Attempt) -> LiveState:
    """The attempt's status, try and how many steps its stored trajectory holds: one small query
    (the database counts the steps; none is read)."""
    window = trajectory_page(attempt_id=attempt.pk, first=1, count=0, errors_limit=0, patch_chars=0)
    return LiveState(status=attempt.status, live=attempt_is_live(attempt), steps=window.step_count, tries=attempt.tries)


def attempt_patch_download(*, attempt: Attempt, access: GoldAccess) -> str | None:
    """The attempt's whole final patch (its own, else its trajectory's) for the plain-text
    download, or None when it holds gold code this viewer may not see; lines quoting a gold body
    withheld as on the page (such a patch no longer applies: it is for reading)."""
    patch, trajectory_patch, header_agent = Attempt.objects.values_list(
        "final_patch", KT("trajectory__final_patch"), KT("trajectory__header__agent")
    ).get(pk=attempt.pk)
    if not access.code and (attempt.run.agent in GOLD_CODE_AGENTS or header_agent in GOLD_CODE_AGENTS):
        return None
    text = patch or trajectory_patch or ""
    if access.code and access.numbers:
        return text
    redaction = gold_redaction_for(access=access, paper=attempt.sample.paper, suite=attempt.run.suite)
    return "".join(line[:1] + redaction.text(line[1:]) if line[:1] in ("+", "-", " ") and not line.startswith(("+++ ", "--- "))
                   else line for line in text.splitlines(keepends=True))


@dataclass(frozen=True)
class SourceLink:
    """The original file of a converted trajectory, as the attempt page's header links it."""

    title: str  # "mini-swe-agent 1.1"
    filename: str
    size: int
    url: str


def attempt_trajectory_source(*, attempt: Attempt) -> SourceLink | None:
    """The link to the original file of the attempt's trajectory, when it was converted from
    another tool's (runs.models.TrajectorySource); read with the attempt (attempt_get_for_replay)."""
    try:
        source = attempt.trajectory_source
    except TrajectorySource.DoesNotExist:
        return None
    version = source.source_version
    # Versions such as "mini-swe-agent-1.1" repeat the format's name: shown once.
    if version.startswith(source.source_format + "-"):
        version = version[len(source.source_format) + 1:]
    try:
        url = reverse("replay:source", args=[attempt.pk])
    except NoReverseMatch:
        return None
    return SourceLink(f"{source.source_format} {version}".strip(), source.filename, source.size, url)


def attempt_source_download(*, attempt: Attempt) -> TrajectorySource | None:
    """The original file of the attempt's trajectory, content included, or None."""
    return TrajectorySource.objects.filter(attempt=attempt).first()
