#!/usr/bin/env python
"""Server time of the leaderboard, a system's page, the exports and long trajectories' pages on a loaded database.

Creates a scratch Postgres database (bench_pages_<pid>), migrates it, bulk-loads a synthetic suite,
100,000 attempts across 50 systems (several n, k of 1, 3 or 5, some systems uploaded and not
re-executed, errors, unknown costs, oracle verifier selections), one attempt with a 500-step
trajectory and one with 5,000 steps (its first and a middle page, and the step bodies a page's
script fetches on demand). On top of those, one uploaded system of 30,000 attempts (`--big-system`:
30 submissions of 1,000, spread over the n = 1 samples) whose page, JSON and samples CSV are timed,
and as many uploaded attempts again at n = 1 as bring the samples page of n = 1 to 72,000 attempts
(`--samples-attempts`): pages whose size once grew with the attempts. Then one uploaded system of
300,000 attempts at n = 2 (`--huge-system`, 300 submissions; n = 2 so that the samples page of n = 1
keeps its own figure), whose page reads only what its refresh stored, and, once every page above
is timed, a leaderboard of 5,000 systems (`--leaderboard-systems`: copies of the measured systems'
stored numbers under model names of their own, each with a public run; the function table is not
among their numbers). Each defaults to its share of `--attempts` (30%, 72%, 300% and 5%), so a
smaller run is smaller throughout; the pages measured against a target end with a line each
(the leaderboard 100 ms, a system page 150 ms at the 95th percentile). It computes the leaderboard's stored numbers (leaderboard.standings) as
`manage.py refresh_standings --all` does, then times requests through Django's test Client (in
process: server time only, no network) and prints the first request, median and 95th percentile of
each page and its query count.

"Leaderboard after a change" is timed right after a system's attempts changed (as when an attempt
of a busy run settles): its numbers are then stale until the refresh job runs, and the page shows
them marked so without computing anything. The refresh job's own time for that system is printed
apart. The database (and the scratch maintenance queue) are dropped at the end, whatever happens.

    .venv/bin/python scripts/bench_pages.py [--attempts 100000] [--systems 50] [--requests 30]
        [--big-system 30000] [--samples-attempts 72000] [--huge-system 300000] [--leaderboard-systems 5000]

Postgres: BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432), a role that may create
databases. Takes about six minutes on two cores, most of it loading the 300,000 attempts.
"""
from __future__ import annotations

import argparse
import gc
import io
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import create_database, drop_database, percentile  # noqa: E402 - beside this script
from benchsuite import AGENTS, CONTEXTS, MODELS, load_suite  # noqa: E402

SERVER = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432").rstrip("/")
DB_NAME = f"bench_pages_{os.getpid()}"
os.environ["DATABASE_URL"] = f"{SERVER}/{DB_NAME}"
# DEBUG serves static files without collectstatic; nothing measured depends on it.
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoexperiment_site.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# The refresh jobs the change below queues go on a queue of this run's own, deleted at the end.
os.environ["MAINTENANCE_QUEUE"] = f"bench-maintenance-{os.getpid()}"
# Server time is measured, not the per-address page limits (which a client asking 30 times a
# second from one address would meet at once).
for _limit in ("RATE_LIMIT_PAGES_PER_ADDRESS", "RATE_LIMIT_HEAVY_PAGES_PER_ADDRESS"):
    os.environ[_limit] = "off"

CONFIGS = [{}, {"history": "window", "window": 5}, {"history": "window", "window": 10}, {"temperature": 0.2}]  # 240 systems at most
TRAJECTORY_STEPS = 500
LONG_TRAJECTORY_STEPS = 5_000  # over the 1,000 an upload may now hold: as stored before the limits


def load_attempts(suite, samples, *, total: int, systems: int):
    from leaderboard.models import VerifierSelection
    from runs.models import Attempt, Run

    rng = random.Random(11)
    by_n = {}
    for sample in samples:
        by_n.setdefault(sample.n, []).append(sample)
    difficulty = {sample.pk: rng.uniform(0.3, 1.6) for sample in samples}
    keys = list(product(MODELS, AGENTS, CONTEXTS, CONFIGS))
    rng.shuffle(keys)
    keys = keys[:systems]
    per_system = total // systems
    n_choices = [(1, 2), (1, 2, 3), (2, 3), (1, 2, 3)]
    now = datetime.now(UTC)
    attempts_made = 0
    selections = []
    for number, ((model, strength), agent, context, config) in enumerate(keys):
        k = (1, 3, 5)[number % 3]
        n_values = n_choices[number % len(n_choices)]
        uploaded = number % 5 == 4  # a fifth are uploaded results, never re-executed
        harness = 0.35 if agent == "agentless" else 1.0
        context_factor = {"full": 1.0, "none": 0.6, "oracle": 1.15}[context]
        pool = [sample for n in n_values for sample in by_n[n]]
        wanted = per_system if number < systems - 1 else total - attempts_made
        run_number = 0
        while wanted > 0:
            chosen = rng.sample(pool, min(len(pool), -(-wanted // k)))
            started = now - timedelta(days=rng.randint(1, 60))
            # Some systems have a run still going (no finished_at).
            finished = None if (number % 7 == 3 and run_number == 0) else started + timedelta(hours=rng.randint(1, 20))
            run = Run.objects.create(
                suite=suite, agent=agent, model=model, agent_config=config, context=context, n_values=list(n_values),
                attempts_per_sample=k, sandbox_backend="bubblewrap", finished_at=finished,
                description=f"bench system {number} run {run_number}",
            )
            Run.objects.filter(pk=run.pk).update(created_at=started)
            batch = []
            for sample in chosen:
                p = min(0.95, strength * harness * context_factor * (0.3 ** (sample.n - 1)) / difficulty[sample.pk])
                for index in range(k):
                    if wanted <= 0:
                        break
                    wanted -= 1
                    batch.append(_attempt(rng, run, sample, index, p, uploaded))
            Attempt.objects.bulk_create(batch, batch_size=2000)
            attempts_made += len(batch)
            if k > 1:
                selections += _oracle_selections(run, batch)
            run_number += 1
    VerifierSelection.objects.bulk_create(selections, batch_size=5000)
    return attempts_made, len(keys)


UPLOAD_SIZE = 1_000  # attempts per submission of the big uploaded systems


def load_uploaded_system(suite, samples, *, total: int, model: str, n: int = 1) -> str:
    """One uploaded system (never re-executed) of `total` attempts at the samples of `n`, as
    submissions of UPLOAD_SIZE attempts each, spread evenly over the samples; returns its slug."""
    from leaderboard.rules import canonical_config, system_slug
    from runs.models import Attempt, Run, Submission

    rng = random.Random(total)
    pool = [sample for sample in samples if sample.n == n]
    config = {"uploaded": True}
    made = 0
    while made < total:
        size = min(UPLOAD_SIZE, total - made)
        run = Run.objects.create(
            suite=suite, agent="react", model=model, agent_config=config, context="full", n_values=[n],
            attempts_per_sample=5, sandbox_backend="bubblewrap", finished_at=datetime.now(UTC),
            description=f"bench upload {made // UPLOAD_SIZE}",
        )
        Submission.objects.create(run=run, model=model, agent="react", contact="bench@example.org",
                                  file_sha256="0" * 64, file_bytes=size * 2_000, record_count=size)
        batch = [
            _attempt(rng, run, pool[number % len(pool)], number // len(pool), 0.3, True)
            for number in range(size)
        ]
        Attempt.objects.bulk_create(batch, batch_size=2000)
        made += size
    return system_slug(suite=suite.name, agent="react", model=model, config_json=canonical_config(config), context="full")


def clone_systems(suite, *, count: int) -> int:
    """`count` more systems on the leaderboard, as leaderboard.standings would have stored them: each
    the stored numbers of a measured system (Pass@1 moved a little, so that sorting has work to do)
    under a model name of its own, with one public run of no attempts. What the leaderboard reads of
    a system is all there (its standing, its numbers by n, its run); returns how many were made."""
    from leaderboard.models import SystemStanding, SystemStandingByN
    from leaderboard.rules import system_slug
    from runs.models import Run

    rng = random.Random(count)
    templates = list(SystemStanding.objects.filter(refreshed_at__isnull=False).exclude(run_ids=[]).order_by("pk"))
    numbers: dict[int, list] = {}
    for row in SystemStandingByN.objects.filter(standing__in=templates):
        numbers.setdefault(row.standing_id, []).append(row)
    templates = [template for template in templates if template.pk in numbers]
    chosen = [templates[number % len(templates)] for number in range(count)]
    now = datetime.now(UTC)
    runs = Run.objects.bulk_create([
        Run(suite=suite, agent=template.agent, model=f"{template.model}-variant-{number}", agent_config=json.loads(template.config_json),
            context=template.context, n_values=[1], attempts_per_sample=template.k, sandbox_backend="bubblewrap",
            finished_at=now, description=f"bench clone {number}")
        for number, template in enumerate(chosen)
    ], batch_size=2000)
    standings = SystemStanding.objects.bulk_create([
        SystemStanding(
            slug=system_slug(suite=template.suite, agent=template.agent, model=run.model, config_json=template.config_json,
                             context=template.context),
            suite=template.suite, agent=template.agent, model=run.model, config_json=template.config_json,
            context=template.context, run_ids=[run.pk], k=template.k, date=template.date, changes=1, refreshed_changes=1,
            refreshed_at=now,
        )
        for run, template in zip(runs, chosen)
    ], batch_size=2000)
    by_n = []
    for standing, template in zip(standings, chosen):
        for row in numbers[template.pk]:
            metrics = dict(row.metrics)
            if metrics.get("pass1") is not None:
                metrics["pass1"] = min(1.0, max(0.0, metrics["pass1"] + rng.uniform(-0.05, 0.05)))
            by_n.append(SystemStandingByN(standing=standing, verified_only=row.verified_only, n=row.n, metrics=metrics))
    SystemStandingByN.objects.bulk_create(by_n, batch_size=5000)
    return len(standings)


def _attempt(rng, run, sample, index, p, uploaded):
    from runs.models import Attempt

    fields = {
        "run": run, "sample": sample, "index": index, "input_tokens": rng.randint(20_000, 400_000),
        "output_tokens": rng.randint(2_000, 30_000), "agent_seconds": rng.uniform(60, 1500),
        "cost": None if rng.random() < 0.05 else rng.uniform(0.02, 0.9), "exit_status": "submitted",
    }
    if rng.random() < 0.03:
        return Attempt(status=Attempt.ERROR, failure_label=rng.choice([Attempt.INFRASTRUCTURE, Attempt.MODEL_PROVIDER]), **fields)
    reported = rng.random() < p * 1.1
    if uploaded:
        return Attempt(status=Attempt.DONE, reported_passed=reported, reexecution_passed=None, passed=False, **fields)
    reexecuted = reported and rng.random() < 0.93
    return Attempt(
        status=Attempt.DONE, reported_passed=reported, reexecution_passed=reexecuted, passed=reported and reexecuted,
        mismatch=reported and not reexecuted, failure_label="" if reported and reexecuted else Attempt.WRONG_ANSWER, **fields,
    )


def _oracle_selections(run, attempts):
    from leaderboard.models import VerifierSelection
    from runs.models import Attempt

    by_sample = {}
    for attempt in attempts:
        if attempt.status == Attempt.DONE:
            by_sample.setdefault(attempt.sample_id, []).append(attempt)
    selections = []
    for sample_id, candidates in by_sample.items():
        if len(candidates) < 2:
            continue
        verdicts = [a.passed if a.reexecution_passed is not None else a.reported_passed for a in candidates]
        chosen = candidates[verdicts.index(True)] if any(verdicts) else candidates[0]
        selections.append(VerifierSelection(run=run, sample_id=sample_id, attempt=chosen, verifier="oracle", candidates=len(candidates)))
    return selections


def long_trajectory(sample_id: str, steps: int) -> dict:
    from runs.agents.trajectory import FileChange, FinalAnswer, Header, Step, Trajectory

    start = datetime(2026, 1, 1, tzinfo=UTC)
    tools = ["list_files", "inspect_file_lines", "edit_file", "execute_python_script", "command_line", "understand_file"]
    trajectory = Trajectory(header=Header(
        sample_id=sample_id, agent="react", model="openai:gpt-4o", config={"history": "full"},
        versions={"python": "3.11.2", "trajectory_format": "autoexperiment.trajectory/1"},
        started_at=start.isoformat(), ended_at=(start + timedelta(seconds=steps * 6)).isoformat(),
        exit_status="submitted", input_tokens=steps * 9_000, output_tokens=steps * 400, cost=steps * 0.002,
    ))
    for index in range(steps):
        tool = tools[index % len(tools)]
        changes = []
        if tool == "edit_file":
            body = "\n".join(f"+    value_{line} = compute({line})" for line in range(12))
            changes = [FileChange(path=f"code/src/module_{index % 3}.py", change="modified",
                                  diff=f"--- a/src/module_{index % 3}.py\n+++ b/src/module_{index % 3}.py\n@@ -10,3 +10,15 @@\n{body}\n")]
        trajectory.steps.append(Step(
            index=index, started_at=(start + timedelta(seconds=index * 6)).isoformat(), duration=5.5, model_seconds=4.0,
            thought=f"Step {index}: the loss is off by a factor; check how the bias correction is applied. " * 3,
            tool=tool, arguments={"path": f"code/src/module_{index % 3}.py", "start": 1, "end": 80},
            tool_call_id=f"call_{index}", observation="\n".join(f"{line:4d}  x = y * {line}" for line in range(60)),
            error=index % 17 == 0, traceback="Traceback (most recent call last):\n  ...\nValueError: shapes" if index % 17 == 0 else None,
            files_changed=changes, input_tokens=9_000, output_tokens=400, cost=0.002,
        ))
    trajectory.final_answer = FinalAnswer(raw='{"Experiment 1": {"loss": 0.25}}', parsed={"Experiment 1": {"loss": 0.25}}, parse_method="json")
    trajectory.final_patch = "--- a/src/module_0.py\n+++ b/src/module_0.py\n@@ -1 +1 @@\n-raise NotImplementedError\n+return x\n"
    return trajectory.model_dump()


def _short(count: int) -> str:
    """30000 -> "30k", 144 -> "144": a count in a page's name."""
    return f"{count // 1000}k" if count >= 1000 else str(count)


def fetched(client, url: str) -> bytes:
    """The body of GET `url`, read to its end (a streamed export is produced as it is read)."""
    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"GET {url} answered {response.status_code}")
    return response.getvalue()


def timed(client, url: str, requests: int) -> tuple[float, list[float], int]:
    started = time.perf_counter()
    fetched(client, url)
    first = time.perf_counter() - started
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        body = fetched(client, url)
        times.append(time.perf_counter() - started)
    return first, times, len(body)


# The pages measured against a target (p95, ms): a leaderboard's page, and a system's.
LEADERBOARD_PAGE, SYSTEM_PAGE = "leaderboard", "system"
TARGETS_MS = {LEADERBOARD_PAGE: 100, SYSTEM_PAGE: 150}


def time_pages(client, pages, requests: int) -> list[tuple[str | None, float]]:
    """Time each of `pages` ((name, URL function[, target kind]) each) and print its row; returns
    (target kind or None, p95 in seconds) per page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    measured = []
    for name, make_url, *kind in pages:
        url = make_url()
        first, times, size = timed(client, url, requests)
        with CaptureQueriesContext(connection) as queries:
            fetched(client, url)
        p95 = percentile(times, 0.95)
        print(f"{name:<28}{first * 1000:>7.0f}ms{statistics.median(times) * 1000:>7.0f}ms"
              f"{p95 * 1000:>7.0f}ms{len(queries):>9}{size / 1024:>8.0f}")
        measured.append((kind[0] if kind else None, p95))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page, after a first one")
    parser.add_argument("--big-system", type=int, help="attempts of one uploaded system whose page is timed "
                        "(default: 30%% of --attempts, 30,000)")
    parser.add_argument("--samples-attempts", type=int, help="attempts at n = 1, topped up by a second uploaded "
                        "system, under the samples page timed (default: 72%% of --attempts, 72,000)")
    parser.add_argument("--huge-system", type=int, help="attempts of one uploaded system at n = 2 whose page is "
                        "timed (default: 300%% of --attempts, 300,000)")
    parser.add_argument("--leaderboard-systems", type=int, help="systems on the leaderboard timed last "
                        "(default: 5%% of --attempts, 5,000)")
    options = parser.parse_args()
    # In proportion by default, so that a smoke run at a tiny --attempts stays tiny.
    if options.big_system is None:
        options.big_system = options.attempts * 3 // 10
    if options.samples_attempts is None:
        options.samples_attempts = options.attempts * 72 // 100
    if options.huge_system is None:
        options.huge_system = options.attempts * 3
    if options.leaderboard_systems is None:
        options.leaderboard_systems = max(options.attempts // 20, options.systems + 3)

    create_database(f"{SERVER}/postgres", DB_NAME)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.urls import reverse

        from leaderboard import computation, figures
        from leaderboard.models import SystemStanding
        from leaderboard.standings import standings_refresh_queued
        from runs.models import Attempt, Run
        from runs.signals import results_changed_send

        clock = time.perf_counter()
        call_command("migrate", verbosity=0)
        print(f"database {DB_NAME}: migrated in {time.perf_counter() - clock:.1f} s")
        clock = time.perf_counter()
        suite, samples = load_suite(name="bench", file_of=lambda f: f"src/module_{f % 3}.py")
        made, systems = load_attempts(suite, samples, total=options.attempts, systems=options.systems)
        big_slug = load_uploaded_system(suite, samples, total=options.big_system, model="openai:uploaded-big")
        at_n1 = Attempt.objects.filter(sample__n=1).count()
        if options.samples_attempts > at_n1:
            load_uploaded_system(suite, samples, total=options.samples_attempts - at_n1, model="openai:uploaded-top-up")
        at_n1 = Attempt.objects.filter(sample__n=1).count()
        huge_slug = load_uploaded_system(suite, samples, total=options.huge_system, model="openai:uploaded-huge", n=2)
        made = Attempt.objects.count()
        # Written by update(), so that no object of this process keeps the trajectories: a web process
        # holds none of the loader's data, and a heap full of it would slow every garbage collection.
        target, longest = Attempt.objects.filter(status=Attempt.DONE).order_by("id").select_related("sample")[:2]
        for attempt, steps in ((target, TRAJECTORY_STEPS), (longest, LONG_TRAJECTORY_STEPS)):
            Attempt.objects.filter(pk=attempt.pk).update(trajectory=long_trajectory(attempt.sample.sample_id, steps))
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # what autovacuum would otherwise do while pages are timed
        print(f"loaded {made:,} attempts across {systems} systems and 3 uploaded ones, {len(samples):,} samples, "
              f"a {TRAJECTORY_STEPS}- and a {LONG_TRAJECTORY_STEPS:,}-step trajectory in {time.perf_counter() - clock:.1f} s; "
              f"the big uploaded system holds {options.big_system:,} attempts, the huge one {options.huge_system:,} "
              f"(at n = 2), n = 1 {at_n1:,}")
        clock = time.perf_counter()
        call_command("refresh_standings", "--all", stdout=io.StringIO())
        print(f"stored numbers of {SystemStanding.objects.count()} systems computed (refresh_standings --all) in "
              f"{time.perf_counter() - clock:.1f} s")
        figures._memoised.cache_clear()  # built by the command into the shared cache, not by a web process

        # As gunicorn's workers do once loaded (autoexperiment_site/gunicorn_conf.py, post_worker_init).
        gc.collect()
        gc.freeze()
        client = Client(HTTP_HOST="localhost")
        changed_run = Run.objects.filter(hidden=False).order_by("id").first()

        def after_a_change() -> str:
            """A change to one system's numbers (a failed attempt passes), announced as a settled attempt
            announces it: until the refresh job has run, the page shows the system's last numbers as stale."""
            failed = changed_run.attempts.filter(status=Attempt.DONE, reported_passed=False).order_by("id").first()
            Attempt.objects.filter(pk=failed.pk).update(reported_passed=True, reexecution_passed=True, passed=True)
            results_changed_send(run_ids=[changed_run.pk])
            return reverse("leaderboard:home")

        big_system = reverse("leaderboard:system", args=[big_slug])
        samples_n1 = reverse("leaderboard:benchmark_samples", args=[suite.name]) + "?n=1"

        def first_system() -> str:
            slug = client.get(reverse("leaderboard:home"), {"format": "json"}).json()["rows"][0]["slug"]
            return reverse("leaderboard:system", args=[slug])

        pages = [  # URLs as functions, called just before their page is timed
            ("leaderboard", lambda: reverse("leaderboard:home"), LEADERBOARD_PAGE),
            ("leaderboard after a change", after_a_change),
            ("  with unverified uploads", lambda: reverse("leaderboard:home") + "?unverified=1"),
            ("leaderboard JSON export", lambda: reverse("leaderboard:home") + "?format=json"),
            ("leaderboard CSV export", lambda: reverse("leaderboard:home") + "?format=csv"),
            ("one system's page", first_system, SYSTEM_PAGE),
            ("its JSON export", lambda: first_system() + "?format=json"),
            ("its by-n CSV export", lambda: first_system() + "?format=csv&table=by_n"),
            (f"trajectory ({TRAJECTORY_STEPS} st.), p. 1", lambda: reverse("replay:attempt", args=[target.pk])),
            (f"trajectory ({LONG_TRAJECTORY_STEPS}), p. 1", lambda: reverse("replay:attempt", args=[longest.pk])),
            (f"trajectory ({LONG_TRAJECTORY_STEPS}), p. 125", lambda: reverse("replay:attempt", args=[longest.pk]) + "?page=125"),
            # What the page's script fetches as the rest of a page's steps come into view.
            ("  steps 6-20 (on demand)", lambda: reverse("replay:steps", args=[longest.pk]) + "?first=6&last=20"),
            ("function difficulty", lambda: reverse("leaderboard:functions")),
            (f"system, {_short(options.big_system)} uploaded att.", lambda: big_system, SYSTEM_PAGE),
            ("  with unverified uploads", lambda: big_system + "?unverified=1", SYSTEM_PAGE),
            ("  its JSON (a page)", lambda: big_system + "?unverified=1&format=json"),
            ("  its samples CSV (all)", lambda: big_system + "?unverified=1&format=csv"),
            (f"samples n=1, {_short(at_n1)} att.", lambda: samples_n1),
            ("  its JSON (a page)", lambda: samples_n1 + "&format=json"),
        ]
        huge_system = reverse("leaderboard:system", args=[huge_slug])
        pages += [
            (f"system, {_short(options.huge_system)} uploaded att.", lambda: huge_system, SYSTEM_PAGE),
            ("  with unverified uploads", lambda: huge_system + "?unverified=1", SYSTEM_PAGE),
            ("  its JSON, samples p. 2", lambda: huge_system + "?unverified=1&format=json&samples_page=2", SYSTEM_PAGE),
        ]
        print(f"\n{'page':<28}{'first':>9}{'median':>9}{'p95':>9}{'queries':>9}{'KB':>8}   ({options.requests} requests after the first)")
        measured = time_pages(client, pages, options.requests)
        stale = [row["slug"] for row in client.get(reverse("leaderboard:home"), {"format": "json"}).json()["rows"] if row.get("stale")]
        # The job runs in a fresh work horse, and the page is then served by web processes that built
        # nothing: nothing memoised in this process counts.
        computation._interval.cache_clear()
        figures._memoised.cache_clear()
        clock = time.perf_counter()
        standings_refresh_queued()
        job = time.perf_counter() - clock
        figures._memoised.cache_clear()
        url = reverse("leaderboard:home")
        first, times, size = timed(client, url, options.requests)
        print(f"{'leaderboard after the job':<28}{first * 1000:>7.0f}ms{statistics.median(times) * 1000:>7.0f}ms"
              f"{percentile(times, 0.95) * 1000:>7.0f}ms{'':>9}{size / 1024:>8.0f}")
        print(f"\nthe refresh job after that change: {len(stale)} stale system recomputed in {job * 1000:.0f} ms, its "
              f"bootstrap intervals and the figures of the leaderboard's first view included "
              f"({Attempt.objects.filter(run_id__in=SystemStanding.objects.get(slug=stale[0]).run_ids).count():,} attempts)")

        clock = time.perf_counter()
        cloned = clone_systems(suite, count=options.leaderboard_systems - SystemStanding.objects.count())
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        total = SystemStanding.objects.count()
        print(f"\n{cloned:,} systems added to the leaderboard's stored numbers in {time.perf_counter() - clock:.1f} s: "
              f"{total:,} in all")
        home = reverse("leaderboard:home")

        def last_page(query: str) -> str:
            pages = client.get(f"{home}?{query}&format=json").json()["page"]["pages"]
            return f"{home}?{query}&page={pages}"

        measured += time_pages(client, [
            (f"leaderboard, {_short(total)} systems", lambda: home, LEADERBOARD_PAGE),
            ("  after a change", after_a_change, LEADERBOARD_PAGE),
            ("  its JSON (a page)", lambda: home + "?format=json", LEADERBOARD_PAGE),
            ("  by name, last page", lambda: last_page("sort=name"), LEADERBOARD_PAGE),
            ("  with unverified, last p.", lambda: last_page("unverified=1&sort=-date"), LEADERBOARD_PAGE),
        ], options.requests)
        print()
        for kind, target in TARGETS_MS.items():
            worst = max(p95 for measured_kind, p95 in measured if measured_kind == kind) * 1000
            print(f"target: {kind} pages p95 at most {target} ms; worst {worst:.0f} ms: {'met' if worst <= target else 'NOT met'}")
    finally:
        try:
            from runs.evaluation.queue import maintenance_queue

            maintenance_queue().delete(delete_jobs=True)
        except Exception:  # noqa: BLE001 - Django never set up, or Redis away: nothing was queued
            pass
        drop_database(f"{SERVER}/postgres", DB_NAME)
        print(f"\ndatabase {DB_NAME} dropped")


if __name__ == "__main__":
    main()
