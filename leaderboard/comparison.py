"""Paired comparison of two leaderboard systems: on the samples both attempted, per n.

The rules (also shown on the page):

- Systems, counted attempts and verdicts are the leaderboard's (leaderboard.selectors): public runs
  only, attempts with status `done` (re-executed ones alone with "verified only"), a system's runs
  pooled per sample.
- A sample is *shared* when both systems have at least one counted attempt at it; only shared
  samples are compared.
- A system's score at a sample is c/m (c of its m counted attempts pass). The paired bootstrap
  (runs.benchmark.statistics.paired_bootstrap, seeded like the leaderboard's intervals) resamples
  shared samples and compares these scores exactly: the difference is Pass@1 of A minus Pass@1 of B
  on the shared samples.
- The 2x2 table needs a yes or no per sample: a system *passes* a sample when c/m >= 1/2
  (PASS_SHARE), which with one attempt per sample is that attempt's verdict.
- The samples where they *differ* are those whose scores differ, largest gap first; each links to
  the side-by-side replay of a passing attempt of the better system and a failing one of the other.

Three queries whatever the number of attempts or systems: the two systems' standings, their public
runs, and one grouped query of counted attempts per (system, sample). The bootstrap is memoised by its input, in the process and in the
shared cache, because it costs far more than the queries, and more with every sample.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from fractions import Fraction

import pandas as pd
from django.core.paginator import Page
from django.db.models import Count, F, Min, Q
from django.db.models.functions import Lower
from django.urls import reverse

from autoexperiment_site.caching import cache_quietly, cached
from leaderboard.links import attempt_url_maker
from leaderboard.models import SystemStanding
from leaderboard.paging import page_get
from leaderboard.rules import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    LeaderboardFilters,
    SystemLabels,
    counted_q,
    filters_passes_q,
    runs_frame,
    system_case,
    system_key_q,
    system_name_order,
)
from leaderboard.selectors import standings_shown_runs
from runs.benchmark.statistics import paired_bootstrap
from runs.models import Attempt

# A system passes a sample, for the 2x2 table, when at least this share of its counted attempts pass.
PASS_SHARE = Fraction(1, 2)
# The samples-where-they-differ list shows this many (the total is always given).
DIFFERENCES_LIMIT = 200
_CACHE_SECONDS = 7 * 24 * 3600

A, B = 0, 1


class UnknownSystem(LookupError):
    """No public run belongs to this system slug."""

    def __init__(self, parameter: str, slug: str):
        super().__init__(f"{parameter}={slug!r}: no system on the leaderboard has this id")
        self.parameter = parameter
        self.slug = slug


@dataclass(frozen=True)
class ComparedSystem(SystemLabels):
    slug: str
    suite: str
    agent: str
    model: str
    config_json: str
    context: str
    run_ids: tuple[int, ...]

    @property
    def url(self) -> str:
        return reverse("leaderboard:system", args=[self.slug])

    def as_dict(self) -> dict:
        return {"slug": self.slug, "name": self.name, "suite": self.suite, "agent": self.agent, "model": self.model,
                "agent_config": json.loads(self.config_json), "context": self.context, "runs": list(self.run_ids)}


class SampleScore:
    """One system at one sample: c of m counted attempts pass; a passing and a failing attempt (or None).

    A plain class with slots, its score and verdict computed once: there is one per system and
    sample, thousands per page."""

    __slots__ = ("m", "c", "passing_attempt", "failing_attempt", "score", "passes")

    def __init__(self, m: int, c: int, passing_attempt: int | None, failing_attempt: int | None):
        self.m, self.c = m, c
        self.passing_attempt, self.failing_attempt = passing_attempt, failing_attempt
        self.score = c / m
        # c/m >= PASS_SHARE in integers (Fraction arithmetic per sample costs more than the query).
        self.passes = c * PASS_SHARE.denominator >= PASS_SHARE.numerator * m

    def same_score(self, other: SampleScore) -> bool:
        """c/m equal, exactly: 1/2 and 2/4 are the same score."""
        return self.c * other.m == other.c * self.m


@dataclass
class SampleDifference:
    """A shared sample where the two systems' scores differ."""

    sample_pk: int
    sample_id: str
    paper: str
    n: int
    a: SampleScore
    b: SampleScore
    attempt_a: int  # shown side by side: the better system's passing attempt, the other's failing one
    attempt_b: int
    replay_url: str
    attempt_a_url: str | None
    attempt_b_url: str | None

    @property
    def difference(self) -> float:
        return self.a.score - self.b.score

    @property
    def outcome(self) -> str:
        return _outcome(self.a.passes, self.b.passes)

    def as_dict(self) -> dict:
        return {
            "sample_id": self.sample_id, "paper": self.paper, "n": self.n,
            "a_passes": self.a.c, "a_attempts": self.a.m, "b_passes": self.b.c, "b_attempts": self.b.m,
            "difference": self.difference, "outcome": self.outcome,
            "attempt_a": self.attempt_a, "attempt_b": self.attempt_b, "replay_compare_url": self.replay_url,
        }


def _outcome(a_passes: bool, b_passes: bool) -> str:
    if a_passes and b_passes:
        return "both"
    if a_passes:
        return "only_a"
    if b_passes:
        return "only_b"
    return "neither"


@dataclass
class NComparison:
    """Both systems at one n."""

    n: int
    samples_a: int  # samples with a counted attempt of A
    samples_b: int
    shared: int
    attempts_a: int  # counted attempts of A at the shared samples
    attempts_b: int
    both: int = 0
    only_a: int = 0
    only_b: int = 0
    neither: int = 0
    pass1_a: float | None = None  # on the shared samples
    pass1_b: float | None = None
    difference: float | None = None  # pass1_a - pass1_b
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    differing: int = 0  # shared samples whose scores differ

    def as_dict(self) -> dict:
        return {
            "n": self.n, "samples_a": self.samples_a, "samples_b": self.samples_b, "shared_samples": self.shared,
            "attempts_a": self.attempts_a, "attempts_b": self.attempts_b,
            "outcomes": {"both": self.both, "only_a": self.only_a, "only_b": self.only_b, "neither": self.neither},
            "pass1_a": self.pass1_a, "pass1_b": self.pass1_b, "difference": self.difference,
            "difference_ci_low": self.low, "difference_ci_high": self.high, "p_value": self.p_value,
            "differing_samples": self.differing,
        }


@dataclass
class Comparison:
    a: ComparedSystem
    b: ComparedSystem
    verified_only: bool
    n: int | None  # the one n asked for, or None for every n
    by_n: list[NComparison] = field(default_factory=list)
    differences: list[SampleDifference] = field(default_factory=list)  # at most DIFFERENCES_LIMIT
    differences_total: int = 0

    @property
    def shared(self) -> int:
        return sum(row.shared for row in self.by_n)


def _systems(slug_a: str, slug_b: str) -> tuple[pd.DataFrame, ComparedSystem, ComparedSystem]:
    """The public runs of both systems (two queries: their standings, then the runs sharing their keys'
    plain columns, not every run of the site); UnknownSystem names the parameter of a missing one."""
    standings = {standing.slug: standing for standing in SystemStanding.objects.filter(slug__in=[slug_a, slug_b])}
    if slug_a in standings and slug_b in standings:
        runs = runs_frame(system_key_q(standings[slug_a]) | system_key_q(standings[slug_b]))
    else:  # a system never seen public yet: found among every run
        runs = runs_frame(Q())
    runs = runs[runs["slug"].isin([slug_a, slug_b])].copy()
    found = []
    for parameter, slug in (("a", slug_a), ("b", slug_b)):
        own = runs[runs["slug"] == slug]
        if own.empty:
            raise UnknownSystem(parameter, slug)
        first = own.iloc[0]
        found.append(ComparedSystem(
            slug=slug, suite=first["suite"], agent=first["agent"], model=first["model"],
            config_json=first["config_json"], context=first["context"],
            run_ids=tuple(int(pk) for pk in own["run_id"]),
        ))
    # system_case numbers systems by system_no: make A 0 and B 1.
    runs["system_no"] = [A if slug == slug_a else B for slug in runs["slug"]]
    return runs, found[0], found[1]


def _per_sample_rows(runs: pd.DataFrame, filters: LeaderboardFilters, n: int | None) -> list[tuple]:
    """Counted attempts per (system, sample): (system_no, sample pk, n, sample id, paper id, m, c, a passing
    attempt, a failing attempt); one query."""
    counted = counted_q(filters)
    attempts = Attempt.objects.filter(counted, run_id__in=[int(pk) for pk in runs["run_id"]])
    if n is not None:
        attempts = attempts.filter(sample__n=n)
    return list(
        attempts.annotate(system_no=system_case(runs), n=F("sample__n"))
        .order_by()
        .values("system_no", "sample_id", "n", "sample__sample_id", "sample__paper__paper_id")
        .annotate(
            m=Count("id"),
            c=Count("id", filter=filters_passes_q(filters)),
            passing=Min("id", filter=filters_passes_q(filters)),
            failing=Min("id", filter=~filters_passes_q(filters)),
        )
        .values_list("system_no", "sample_id", "n", "sample__sample_id", "sample__paper__paper_id", "m", "c",
                     "passing", "failing")
    )


@functools.lru_cache(maxsize=256)
def _bootstrap(scores: tuple[tuple[int, float, float], ...]) -> tuple[float, float, float, float]:
    """(difference, low, high, p) of paired_bootstrap on (sample pk, score of A, score of B) triples.

    Memoised in the process and in the shared cache: the same scores always give the same result
    (fixed seed; paired_bootstrap orders samples by key), so a stored result never goes stale.
    """
    key = "compare-bootstrap:" + hashlib.sha256(repr((BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES, CONFIDENCE, scores))
                                                .encode()).hexdigest()
    stored = cached(key, what="compare bootstrap")
    if stored is not None:
        return tuple(stored)
    result = paired_bootstrap(
        {pk: a for pk, a, _ in scores}, {pk: b for pk, _, b in scores},
        confidence=CONFIDENCE, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED,
    )
    values = (result.difference, result.low, result.high, result.p_value)
    cache_quietly(key, values, _CACHE_SECONDS, what="compare bootstrap")
    return values


def _replay_url_maker():
    base = reverse("replay:compare")
    return lambda left, right: f"{base}?a={left}&b={right}"


def systems_compare(*, slug_a: str, slug_b: str, verified_only: bool = True, n: int | None = None) -> Comparison:
    """Systems `slug_a` and `slug_b` compared sample by sample, per n (every n, or `n` alone), over
    their re-executed attempts (`verified_only=False`: unverified ones too, by their reported verdict).

    Raises UnknownSystem when a slug has no public run. Two queries, plus the bootstrap when its
    input was not seen before.
    """
    runs, system_a, system_b = _systems(slug_a, slug_b)
    filters = LeaderboardFilters(verified_only=verified_only)
    by_sample: dict[int, dict] = {}
    for system_no, sample_pk, n_value, sample_id, paper, m, c, passing, failing in _per_sample_rows(runs, filters, n):
        entry = by_sample.get(sample_pk)
        if entry is None:
            entry = by_sample[sample_pk] = {"n": n_value, "sample_id": sample_id, "paper": paper}
        entry[system_no] = SampleScore(m, c, passing, failing)

    per_n, differing = _tally_by_n(by_sample)
    differing.sort(key=lambda item: (-abs(item[2].score - item[3].score), item[1]["n"], item[1]["paper"],
                                     item[1]["sample_id"], item[0]))  # largest gap first, then by sample
    differences = _differences(differing[:DIFFERENCES_LIMIT])
    return Comparison(
        a=system_a, b=system_b, verified_only=verified_only, n=n, by_n=[per_n[key] for key in sorted(per_n)],
        differences=differences, differences_total=len(differing),
    )


def _tally_by_n(by_sample: dict[int, dict]) -> tuple[dict[int, NComparison], list[tuple]]:
    """Per n, the outcome counts over the samples both systems tried and the paired bootstrap of
    their scores; and the samples where their scores differ, as (sample pk, entry, score a, score b)."""
    per_n: dict[int, NComparison] = {}
    scores_by_n: dict[int, list[tuple[int, float, float]]] = {}
    differing: list[tuple] = []
    for sample_pk, entry in by_sample.items():
        row = per_n.setdefault(entry["n"], NComparison(n=entry["n"], samples_a=0, samples_b=0, shared=0,
                                                        attempts_a=0, attempts_b=0))
        score_a, score_b = entry.get(A), entry.get(B)
        row.samples_a += score_a is not None
        row.samples_b += score_b is not None
        if score_a is None or score_b is None:
            continue
        row.shared += 1
        row.attempts_a += score_a.m
        row.attempts_b += score_b.m
        outcome = _outcome(score_a.passes, score_b.passes)
        setattr(row, outcome, getattr(row, outcome) + 1)
        scores_by_n.setdefault(entry["n"], []).append((sample_pk, score_a.score, score_b.score))
        if not score_a.same_score(score_b):
            row.differing += 1
            differing.append((sample_pk, entry, score_a, score_b))

    for n_value, scores in scores_by_n.items():
        row = per_n[n_value]
        scores.sort()
        row.pass1_a = sum(a for _, a, _ in scores) / len(scores)
        row.pass1_b = sum(b for _, _, b in scores) / len(scores)
        row.difference, row.low, row.high, row.p_value = _bootstrap(tuple(scores))
    return per_n, differing


def _differences(differing: list[tuple]) -> list[SampleDifference]:
    """The differing samples shown, each with an attempt of either system to replay side by side."""
    replay_url, attempt_url = _replay_url_maker(), attempt_url_maker()
    differences = []
    for sample_pk, entry, score_a, score_b in differing:
        # Scores differ, so the better system has a passing attempt and the other a failing one.
        if score_a.score > score_b.score:
            left, right = score_a.passing_attempt, score_b.failing_attempt
        else:
            left, right = score_a.failing_attempt, score_b.passing_attempt
        differences.append(SampleDifference(
            sample_pk=sample_pk, sample_id=entry["sample_id"], paper=entry["paper"], n=entry["n"], a=score_a,
            b=score_b, attempt_a=left, attempt_b=right, replay_url=replay_url(left, right),
            attempt_a_url=attempt_url(left), attempt_b_url=attempt_url(right),
        ))
    return differences


# The picking form offers the systems this many at a time (one account can add systems without end).
CHOICES_PER_PAGE = 200


def comparable_systems_page(*, number: str | None, chosen: tuple[str, ...] = ()) -> tuple[Page, list[ComparedSystem]]:
    """Page `number` of the systems on the leaderboard (stored standings with a run public now), by
    suite and name, and the systems to offer on it: that page's, and the `chosen` slugs' wherever
    they are (so that a preselected system is always there). Sorted and cut in the database; a
    system whose runs were all hidden since its refresh is left off (its page is a row shorter).
    Raises BadPage for a page there is not."""
    standings = SystemStanding.objects.filter(refreshed_at__isnull=False).exclude(run_ids=[]).order_by(
        "suite", system_name_order(), Lower("agent"), "context", "config_json", "slug"
    )
    page = page_get(standings, number=number, per_page=CHOICES_PER_PAGE, parameter="choices_page",
                    what="systems to choose from")
    listed = list(page.object_list)
    on_page = {standing.slug for standing in listed}
    listed += [standing for standing in standings.filter(slug__in=[slug for slug in chosen if slug])
               if standing.slug not in on_page]
    shown = standings_shown_runs(listed)
    systems = [
        ComparedSystem(slug=standing.slug, suite=standing.suite, agent=standing.agent, model=standing.model,
                       config_json=standing.config_json, context=standing.context, run_ids=shown[standing.pk])
        for standing in listed if standing.pk in shown
    ]
    return page, systems
