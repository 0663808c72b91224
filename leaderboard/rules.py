"""The leaderboard's rules: what a system is, which of its attempts count, which pass, and the
settings every number is computed with. Both the refresh that computes the standings
(leaderboard.computation) and the pages that read them (leaderboard.selectors, the benchmark, the
explorer, the comparison) take them from here, so no page can count by another rule.

The rules (also shown on the page, "How to read this"):

- A *system* is (suite, agent, model, agent configuration as canonical JSON, context condition).
  Its runs are pooled: attempts of two runs of the same system at the same sample are attempts of
  one sample.
- Only attempts with status `done` count. Status `error` (sandbox, worker or model provider
  failure) never counts for or against the model; its count is shown.
- An attempt is *verified* when the harness re-executed its code (`reexecution_passed` is set,
  for a run's attempts and an upload's alike); its verdict is then `passed` (reported answer AND
  re-execution pass). By default (`LeaderboardFilters.verified_only`) only verified attempts
  count: an upload never re-executed is not on the leaderboard, whatever numbers it reports. A
  visitor who asks for them (`?unverified=1`) sees unverified attempts counted too, judged by
  their reported verdict (`reported_passed`), and every system with one marked as unverified
  ("reported numbers, not re-executed"). Both views are computed and stored by
  leaderboard.standings, so neither is computed in a request.
- Per sample, c of m counted attempts pass. Pass@1 is the mean over samples of c/m (the unbiased
  pass@1 estimator) with a seeded percentile bootstrap interval over samples. Pass@k (k: the
  largest attempts-per-sample among the system's runs) is the mean of the unbiased per-sample
  pass@k over samples with at least k counted attempts.
- Verifier-selected Pass@1 is the share of samples whose chosen attempt passes (per verifier).
- Pass@1 at tolerance t (the tolerance sensitivity) is the same estimator with every number's
  tolerance scaled by t / 5% (the rule): an attempt passes at t when its stored `tolerance_ratio`
  (its verdict's largest error in units of the tolerance) is at most t / 5%, so at 5% it is Pass@1.
- At n >= 2 a failed attempt's masked functions are judged one by one, each run alone with the
  others gold (runs.evaluation.transplants). Per n, the counted failed attempts are split by what
  that found (leaderboard.metrics.NMetrics.diagnoses: interaction failure, one or several
  functions wrong, not decided), and the per-function difficulty counts an attempt right, wrong or
  undecided about each function it masks (leaderboard.computation._function_counts): exact at
  every n, the undecided apart from the rate.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
from django.db.models import Case, CharField, F, IntegerField, Q, Value, When
from django.db.models.functions import Lower

from leaderboard.models import SystemStanding, VerifierSelection
from runs.benchmark.scoring import DEFAULT_RTOL
from runs.models import Attempt, Run
from runs.visibility import public_runs_q

BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
CONFIDENCE = 0.95
CONTEXT_LABELS = dict(Run.Context.choices)


# Relative tolerances of the tolerance sensitivity (fractions); DEFAULT_RTOL, the rule, is among them.
TOLERANCES = (0.005, 0.01, 0.02, 0.05, 0.10, 0.20)
# Failed attempts whose every number is within this many tolerances are near misses.
NEAR_MISS_FACTOR = 2.0
# A system's page lists this many of its nearest near misses per counting rule and n (its refresh
# stores as many).
NEAR_MISS_LIMIT = 50
# Attempts that ended, as the attempts explorer lists them (its LISTED_STATUSES).
ENDED_STATUSES = (Attempt.DONE, Attempt.ERROR)


def tolerance_scale(tolerance: float) -> float:
    """How many of an attempt's own tolerances `tolerance` is worth: t / DEFAULT_RTOL, rounded so
    that 0.01 / 0.05 is 0.2 and not 0.19999999999999998 (which would fail a ratio of exactly 0.2)."""
    return round(tolerance / DEFAULT_RTOL, 9)


def tolerance_label(tolerance: float) -> str:
    """0.005 -> "0.5%", 0.1 -> "10%"."""
    return f"{tolerance * 100:g}%"


# --- filters and system keys -------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardFilters:
    """What the URL asks for (validated by leaderboard.forms.LeaderboardFilterForm)."""

    suite: str | None = None
    agent: str | None = None
    context: str | None = None
    # True (the default view): re-executed attempts alone count. False: `?unverified=1`, uploads'
    # reported numbers, not re-executed, count too (leaderboard.forms).
    verified_only: bool = True
    n_min: int | None = None
    n_max: int | None = None
    sort: str = ""
    tolerance: float | None = None  # one of TOLERANCES: show (and allow sorting by) Pass@1 at it


def canonical_config(config) -> str:
    """The agent configuration as canonical JSON: same settings, same text, whatever the key order."""
    return json.dumps(config or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def system_slug(*, suite: str, agent: str, model: str, config_json: str, context: str) -> str:
    """A short stable id of a system key, for its page's URL."""
    key = json.dumps([suite, agent, model, config_json, context], ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def system_name(*, model: str, agent: str) -> str:
    """A system as named on every page: "model · agent", "baseline · agent" for the model-free baselines."""
    return f"{model or 'baseline'} · {agent}"


class SystemLabels:
    """How a system key (fields `model`, `agent`, `context`, `config_json`) is shown."""

    model: str
    agent: str
    context: str
    config_json: str

    @property
    def name(self) -> str:
        return system_name(model=self.model, agent=self.agent)

    @property
    def context_label(self) -> str:
        return CONTEXT_LABELS.get(self.context, self.context)

    @property
    def config_label(self) -> str:
        return "" if self.config_json == "{}" else self.config_json


def system_name_order():
    """A stored system's model as its name sorts, in SQL (then its agent): `system_name`'s "model · agent",
    "baseline" for a blank model, in lower case."""
    return Lower(Case(When(model="", then=Value("baseline")), default=F("model"), output_field=CharField()))


def verifier_label(verifier: str) -> str:
    """A verifier as shown: a model spec without its endpoint (which may carry credentials)."""
    return verifier.split("@http", 1)[0]


def system_key_q(standing: SystemStanding | None, prefix: str = "") -> Q:
    """The runs that share the plain columns of `standing`'s system key (a slug is a hash, so the
    runs of one system are found by computing theirs): a superset of its runs, instead of every run
    of the site, which grows with uploads. No standing (a system never seen public): every run."""
    if standing is None:
        return Q()
    return Q(**{f"{prefix}suite__name": standing.suite, f"{prefix}agent": standing.agent,
                f"{prefix}model": standing.model, f"{prefix}context": standing.context})


# --- which attempts count and pass --------------------------------------------------------------------


def n_range_q(filters: LeaderboardFilters, prefix: str) -> Q:
    """The rows whose n (the field `prefix` + "n") is in the range `filters` asks for."""
    q = Q()
    if filters.n_min is not None:
        q &= Q(**{f"{prefix}n__gte": filters.n_min})
    if filters.n_max is not None:
        q &= Q(**{f"{prefix}n__lte": filters.n_max})
    return q


def counted_q(filters: LeaderboardFilters, prefix: str = "") -> Q:
    """The attempts that count: done, and re-executed when only verified ones are wanted."""
    q = Q(**{f"{prefix}status": Attempt.DONE})
    if filters.verified_only:
        q &= Q(**{f"{prefix}reexecution_passed__isnull": False})
    return q


def passes_q(prefix: str = "", *, reported: bool = False) -> Q:
    """An attempt's verdict: `passed`, which only a re-executed attempt can be. With `reported`
    (the view that counts unverified attempts, `not filters.verified_only`), an attempt not
    re-executed passes by its reported verdict."""
    q = Q(**{f"{prefix}reexecution_passed__isnull": False, f"{prefix}passed": True})
    if reported:
        q |= Q(**{f"{prefix}reexecution_passed__isnull": True, f"{prefix}reported_passed": True})
    return q


def filters_passes_q(filters: LeaderboardFilters, prefix: str = "") -> Q:
    """`passes_q` under the counting rule `filters` asks for."""
    return passes_q(prefix, reported=not filters.verified_only)


def attempt_verdict(attempt: Attempt) -> bool:
    """One attempt's verdict as the view with unverified attempts judges it (`passes_q(reported=True)`):
    what the oracle verifier picks by. A re-executed pass is what the default view counts."""
    return bool(attempt.passed) if attempt.reexecution_passed is not None else bool(attempt.reported_passed)


# --- the public runs of each system -------------------------------------------------------------------


_RUN_COLUMNS = ["run_id", "suite", "agent", "model", "agent_config", "context", "k", "n_values", "finished_at", "created_at"]


def runs_frame(run_q: Q) -> pd.DataFrame:
    """Public runs matching `run_q` with their system's slug and a small integer id per system (one
    query). Hidden runs never count, whoever looks: the leaderboard is the public view."""
    rows = Run.objects.filter(run_q & public_runs_q()).order_by("id").values_list(
        "id", "suite__name", "agent", "model", "agent_config", "context", "attempts_per_sample", "n_values",
        "finished_at", "created_at",
    )
    runs = pd.DataFrame.from_records(list(rows), columns=_RUN_COLUMNS)
    runs["config_json"] = [canonical_config(config) for config in runs["agent_config"]]
    runs["slug"] = [
        system_slug(suite=s, agent=a, model=m, config_json=c, context=x)
        for s, a, m, c, x in zip(runs["suite"], runs["agent"], runs["model"], runs["config_json"], runs["context"])
    ]
    numbers = {slug: number for number, slug in enumerate(dict.fromkeys(runs["slug"]))}
    runs["system_no"] = [numbers[slug] for slug in runs["slug"]]
    return runs


def system_case(runs: pd.DataFrame, run_field: str = "run_id") -> Case:
    """SQL mapping each run id to its system's number."""
    whens = [
        When(**{f"{run_field}__in": [int(pk) for pk in block["run_id"]]}, then=Value(int(number)))
        for number, block in runs.groupby("system_no", sort=True)
    ]
    return Case(*whens, default=Value(-1), output_field=IntegerField())


def verifier_choices(run_ids: list[int]) -> Iterator[tuple[int, str, int, int]]:
    """(sample pk, verifier label, chosen attempt pk, run pk) of the runs' verifier selections,
    streamed, oldest run first, so that a dict built from them keeps the newest run's choice."""
    rows = VerifierSelection.objects.filter(run_id__in=run_ids).order_by("run_id").values_list(
        "sample_id", "verifier", "attempt_id", "run_id"
    )
    for sample_pk, verifier, attempt_id, run_id in rows.iterator(chunk_size=5000):
        yield sample_pk, verifier_label(verifier), attempt_id, run_id
