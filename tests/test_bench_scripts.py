"""Every benchmark script in scripts/ runs at a tiny size and prints its figures (issue 31: benchmarks
that cannot rot).

Each script runs as a subprocess, as a person runs it, with its smallest size options; the test checks
that it exits 0 and prints each figure its docstring promises (a regular expression per output line).
What the figures say is not judged: numbers are the scripts' business, not the tests'.

Shared set-up: the scripts' scratch databases are copies of one migrated template (BENCH_TEMPLATE_DATABASE,
scripts/benchlib.py), so that no script pays for its own migrations; their Redis database is the
tests' own (TEST_REDIS_DB), which each may flush, as the tests' fixtures do.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import SHARED_ENVIRONMENTS_ROOT, redis_test_client, redis_test_url, require_backend, shared_database_url

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
NUMBER = r"-?[\d,]+(?:\.\d+)?"
MS = rf"{NUMBER} ?ms"


@dataclass(frozen=True)
class Smoke:
    """One script's tiny run: its arguments, the figures it must print (one regex per line, matched
    anywhere in stdout with re.MULTILINE), the environment it adds, the sandbox backends it needs,
    and whether it takes --redis-db."""

    script: str
    args: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    backends: tuple[str, ...] = ()
    redis_db: bool = True


# The names of the pages each script times, as regular expressions.
EXPLORE_PAGES = ("explorer, 3 filters", "search, rare phrase", "search, common word", "comparison of two",
                 r"\+ search and filters", r"\+ exception filter", r"\+ explorer page \d+", r"\+ comparison, new pair")
PAGES = ("leaderboard", "leaderboard after a change", "  with unverified uploads", "leaderboard JSON export",
         "leaderboard CSV export", "one system's page", "its JSON export", "its by-n CSV export",
         r"trajectory \(500 st\.\), p\. 1", r"trajectory \(5000\), p\. 1", r"trajectory \(5000\), p\. 125",
         r"  steps 6-20 \(on demand\)", "function difficulty", r"system, \d+ uploaded att\.",
         r"  its samples CSV \(all\)", r"samples n=1, \d+ att\.", r"  its JSON \(a page\)",
         r"system, \d+k? uploaded att\.", r"  its JSON, samples p\. 2")
MANY_SYSTEMS_PAGES = (r"leaderboard, \d+k? systems", "  after a change", r"  its JSON \(a page\)", "  by name, last page",
                      r"  with unverified, last p\.")
REPLAY_PAGES = (r"attempt, page 1 \(heaviest\)", r"attempt, page \d+", r"attempt, page \d+ \(last\)", "compare two, page 1")

SMOKES = [
    Smoke("bench_curves.py", ("--repeats", "1"), redis_db=False, figures=(
        *(rf"^curve fit, 5 n x {samples} samples \(\w+\): {MS} \(median of 1\); 1,000 systems, both rules: {NUMBER} s"
          for samples in ("10", "100", "1,000", "10,000")),
    )),
    Smoke("bench_sampling.py", redis_db=False, figures=(
        rf"^enumerate all C\(23,5\) = 33,649 samples: {MS}",
        rf"^draw 100 of C\(33,5\) = 237,336 samples at n=5: {MS}",
        rf"^draw 100 of C\(200,10\) = \S+ samples at n=10: {MS}",
    )),
    *[Smoke("bench_sandbox.py", ("--runs", "1", "--backend", backend), backends=(backend,), redis_db=False, figures=(
        rf"^{backend}\s+{MS}\s+{MS}\s+{MS}" + (r"\s+storage driver \S+" if backend == "docker" else ""),
    )) for backend in ("bubblewrap", "docker")],
    Smoke("bench_environment.py", ("--runs", "1", "--backend", "bubblewrap"), backends=("bubblewrap",), redis_db=False,
          figures=(
              rf"^environment of six==1\.17\.0: cold build {NUMBER} s, warm \(already built\) {MS}",
              rf"^import six: bare {MS}   bubblewrap {MS}",
          )),
    # One paper's first experiment, one timed round and no warm-up: two trainings in all (bare and
    # sandboxed), each on the CPU, while other workers' tests wait for the same two cores.
    Smoke("bench_pytorch.py", ("--runs", "1", "--warm-up-rounds", "0", "--experiments", "1", "--paper", "mixup-label-smoothing",
                               "--backend", "bubblewrap", "--environments-root", str(SHARED_ENVIRONMENTS_ROOT)),
          backends=("bubblewrap",), redis_db=False,
          figures=(
              rf"^environment of torch==2\.13\.0 numpy==2\.4\.6: first call {NUMBER} s, warm \(already built\) {MS}",
              rf"^mixup-label-smoothing experiment 0: bare {NUMBER} s   bubblewrap {NUMBER} s \([+-]{NUMBER}%\)",
              r"^pytorch experiments in bubblewrap: [+-][\d.]+% against bare \(target at most 5%: (met|NOT met)\)",
          )),
    Smoke("bench_explore.py", ("--attempts", "200", "--steps", "3", "--systems", "8", "--requests", "1"), figures=(
        rf"^  200 attempts across 8 systems in {NUMBER} s",
        rf"^  600 steps of {NUMBER} characters on average; \"cuda device-side assert\" in 5 of them, Traceback in {NUMBER}",
        *(rf"^{name}\s+{MS}\s+{MS}\s+{MS}\s+{MS}\s+{NUMBER}\s+{NUMBER}\s+(ok|OVER)$"
          for name in EXPLORE_PAGES),
    )),
    Smoke("bench_pages.py", ("--attempts", "200", "--systems", "6", "--requests", "1"), redis_db=False, figures=(
        r"^loaded \d+ attempts across 6 systems and 3 uploaded ones",
        rf"^stored numbers of 9 systems computed \(refresh_standings --all\) in {NUMBER} s",
        *(rf"^{name}\s+{MS}\s+{MS}\s+{MS}\s+\d+\s+{NUMBER}$" for name in PAGES),
        rf"^leaderboard after the job\s+{MS}\s+{MS}\s+{MS}\s+{NUMBER}$",
        rf"^the refresh job after that change: 1 stale system recomputed in {MS}",
        rf"^\d+ systems added to the leaderboard's stored numbers in {NUMBER} s: \d+ in all",
        *(rf"^{name}\s+{MS}\s+{MS}\s+{MS}\s+\d+\s+{NUMBER}$" for name in MANY_SYSTEMS_PAGES),
        rf"^target: leaderboard pages p95 at most 100 ms; worst {NUMBER} ms: (met|NOT met)$",
        rf"^target: system pages p95 at most 150 ms; worst {NUMBER} ms: (met|NOT met)$",
    )),
    Smoke("bench_datasets.py", ("--attempts", "200", "--systems", "4", "--requests", "1"), figures=(
        rf"^loaded 200 attempts across 4 systems \(\d+ runs\), 2,300 samples in {NUMBER} s",
        *(rf"^{what}, cold build: {NUMBER} s, {rows} attempt rows, [\d,]+ sample rows, zip {NUMBER} MB; "
          rf"peak RSS {NUMBER} MB \(before the build {NUMBER} MB\), Arrow's peak {NUMBER} MB$"
          for what, rows in (("largest system's dataset", "50"), ("suite dataset", "200"))),
        # Served from the file, and not sent again to a client that holds it.
        *(rf"^{what}, cached download: {MS} \(median of 1\); If-None-Match: 304 in {MS}$"
          for what in ("largest system's dataset", "suite dataset")),
        rf"^suite dataset after one more attempt: built again in {NUMBER} s, \+1 attempt row\(s\)$",
    )),
    Smoke("bench_replay.py", ("--requests", "1"), redis_db=False,
          # Limits a tenth of the defaults' or less: the same pages, built and served in a fraction of the time.
          env={"TRAJECTORY_MAX_STEPS": "20", "REPLAY_STEPS_PER_PAGE": "5", "TRAJECTORY_MAX_TEXT_BYTES": "4096",
               "TRAJECTORY_MAX_STEP_BYTES": "16384", "TRAJECTORY_MAX_STEP_FILES": "10", "TRAJECTORY_MAX_STEP_DIFF_LINES": "200",
               "TRAJECTORY_MAX_DIFF_LINES": "2000", "SUBMISSION_MAX_TRAJECTORY_BYTES": "300000", "SUBMISSION_MAX_PATCH_BYTES": "50000"},
          figures=(
              r"^limits: 20 steps, 4,096 bytes per text field",
              r"^stored: a trajectory of 20 steps, [\d,]+ bytes of JSON \(accepted by the upload validator\)",
              *(rf"^{name}\s+{MS}\s+{MS}\s+{MS}\s+{NUMBER} MB\s+({NUMBER} MB|n/a)\s+{NUMBER}\s+\d+$" for name in REPLAY_PAGES),
              rf"^replay request, worst page: {MS} \(first or median\), peak {NUMBER} MB \(target < 300 ms and < 100 MB: (met|NOT met)\)",
          )),
    Smoke("bench_patch_limits.py", ("--files", "2", "--file-kb", "10"), backends=("bubblewrap",),
          # A patch over its limit is not re-executed: the attempt is over in seconds.
          env={"SUBMISSION_MAX_PATCH_BYTES": "10000", "SANDBOX_BACKEND": "bubblewrap"},
          figures=(
              rf"^  work horse peak RSS\s+{NUMBER} MB  \(inherited at the fork: {NUMBER} MB\)",
              rf"^  stored final patch\s+{NUMBER} MB  \([\d,]+ lines\)",
              rf"^  stored trajectory\s+{NUMBER} MB  \(as JSON\)",
              rf"^  attempt\s+{NUMBER} s   status done, outcome patch_too_large",
          )),
    Smoke("bench_transplant.py", ("--n", "2", "--cap", "100", "--attempts", "1"), backends=("bubblewrap",),
          env={"SANDBOX_BACKEND": "bubblewrap"}, figures=(
              r"^built-in suite, mutant at n=2, backend bubblewrap: 1 attempts, 1 failed in re-execution",
              rf"^attempt's own re-execution: median {NUMBER} s",
              rf"^transplants' sandbox time:  median {NUMBER} s per attempt",
              rf"^transplant cost / own re-execution \(sandbox time\): median {NUMBER}x, p95 {NUMBER}x, mean {NUMBER}x",
              rf"^transplant cost / own re-execution \(job time\): median {NUMBER}x, p95 {NUMBER}x, mean {NUMBER}x",
              r"^verdicts: \w+ \d+",
              r"^attempts: \w+ \d+",
          )),
    Smoke("bench_worker.py", ("--attempts", "1", "--workers", "1", "--check-repeats", "1"), backends=("bubblewrap",),
          env={"SANDBOX_BACKEND": "bubblewrap"}, figures=(
              rf"^\s+1\s+1\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+1/1$",
              r"^Per attempt with 1 worker\(s\), mean over 1 attempts:",
              rf"^  claim to result written\s+{MS}",
              rf"^  harness overhead = {NUMBER}% of the experiments' own time",
              r"^  passed attempts that ran them: 1/1; per attempt: check",
              r"^  failed attempts \(noop\) that ran them: 0/1",
              rf"^  reading a sample's variants, paid by every re-execution: {MS}",
              r"^Cost of the hostile-agent checks, per use \(median of 1, on one gold attempt's workspace\):",
              rf"^  workspace snapshot, \d+ files \(sandbox.fs\)\s+{MS}",
              rf"^  final patch parsed, applied and scoped .*{MS}",
              rf"^  workspace removed \(fs.remove_tree\)\s+{MS}",
              r"^Streaming trajectories live \(ATTEMPT_LIVE_SECONDS=2 against 0\), 1 worker, 1 attempts a run, 1 round\(s\):",
              rf"^  streaming overhead = [+-]{NUMBER}% of an attempt's time",
          )),
    Smoke("bench_heal.py", ("--scenario", "same-host"), backends=("bubblewrap",),
          # Healing rounds every second and no back-off: the scenario's wait is a few seconds, not a minute.
          env={"ATTEMPT_RECOVER_INTERVAL_SECONDS": "1", "ATTEMPT_RETRY_BACKOFF_SECONDS": "0"},
          figures=(
              r"^settings: recovery every 1 s, heartbeat stale after \d+ s, first retry after 0 s",
              rf"^same-host\s+{NUMBER} s\s+(ok|OVER)\s+done\s+True\s+2\s+1\s+worker died",
          )),
    # One of the faults, with the fewest attempts the script allows. The others are staged as tests
    # (Postgres restarted: tests/evaluation/test_restarts.py; a supervised worker killed:
    # test_self_healing.py and test_supervisor.py; two deployments on one Redis, whose scenario here
    # starts a whole second deployment, the costliest smoke of a full run: test_deployments.py); the
    # script prints their rows as it prints this one's.
    Smoke("bench_heal.py", ("--scenario", "redis-lost", "--attempts", "2"),
          backends=("bubblewrap",),
          # As above, and work whose job Redis lost queued again a second after it was queued.
          env={"ATTEMPT_RECOVER_INTERVAL_SECONDS": "1", "ATTEMPT_RETRY_BACKOFF_SECONDS": "0", "ATTEMPT_LOST_JOB_GRACE_SECONDS": "1"},
          figures=(
              r"^settings: recovery every 1 s, heartbeat stale after \d+ s, first retry after 0 s, lost jobs queued again after 1 s",
              rf"^redis-lost\s+{NUMBER} s\s+(ok|OVER)\s+2/2\s+\d+\s+\d+",
          )),
    Smoke("bench_scaleout.py", ("--attempts", "2"), backends=("bubblewrap", "docker"), figures=(
        rf"^gold baseline, built-in suite, n=1: 2 attempts, run backend `any`, \d+ CPUs, {NUMBER} s wall, {NUMBER} attempts/min",
        rf"^host-a\s+\S+\s+\d+\s+\d+\s+{NUMBER}$",
        rf"^host-b\s+\S+\s+\d+\s+\d+\s+{NUMBER}$",
        r"^every attempt done exactly once and passed",
    )),
]


def test_every_script_has_a_smoke_run():
    """A new benchmark script joins the table above (or gets its own test, as bench_load has)."""
    scripts = {path.name for path in SCRIPTS.glob("bench_*.py")}
    assert scripts == {smoke.script for smoke in SMOKES} | {"bench_load.py"}


@pytest.fixture(scope="module")
def bench_environment(django_db_setup, django_db_blocker):
    """What every script runs with: the test database's Postgres server, a migrated template for
    their scratch databases (a copy of the test database, which pytest-django has migrated, for tests
    marked django_db; dropped at the end), the tests' Redis."""
    import psycopg
    from django.db import connection, connections

    redis_test_client().close()  # fails in CI, or skips, when Redis is down
    with django_db_blocker.unblock():
        database_url = shared_database_url()
        test_database = connection.settings_dict["NAME"]
        connections.close_all()  # a database being copied must have no one connected
    server = database_url.rsplit("/", 1)[0]
    template = f"bench_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    environment = {
        **os.environ,
        "BENCH_DATABASE_URL": f"{server}/postgres", "BENCH_POSTGRES_URL": server, "BENCH_TEMPLATE_DATABASE": template,
        "REDIS_URL": redis_test_url(), "LOG_LEVEL": "WARNING",
    }
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        try:
            admin.execute(f'CREATE DATABASE "{template}" TEMPLATE "{test_database}"')
        except psycopg.errors.ObjectInUse:  # another process still holds a connection: migrate one instead
            admin.execute(f'CREATE DATABASE "{template}"')
            migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, timeout=300,
                                      env={**environment, "DATABASE_URL": f"{server}/{template}"}, capture_output=True, text=True)
            assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    try:
        yield environment
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')


def run_script(script: str, args, environment: dict) -> str:
    """The script's stdout; fails the test with its output when it exits with an error."""
    result = subprocess.run([sys.executable, str(SCRIPTS / script), *args], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{script} exited with {result.returncode}:\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    return result.stdout


def assert_figures(script: str, output: str, figures) -> None:
    missing = [figure for figure in figures if not re.search(figure, output, re.MULTILINE)]
    assert not missing, f"{script} did not print these figures:\n" + "\n".join(missing) + f"\n--- its output:\n{output}"


@pytest.mark.slow
@pytest.mark.django_db  # so that pytest-django creates the test database, which bench_environment copies
# Two groups of scripts, each run by one worker from the start of the run (make test hands out the
# largest groups first): a worker pays for bench_environment once per group, where scripts handed out
# one at a time among other modules' tests paid for it each time.
@pytest.mark.parametrize("smoke", [
    pytest.param(smoke, id=" ".join([smoke.script, *smoke.backends]), marks=pytest.mark.xdist_group(f"bench-scripts-{index % 2}"))
    for index, smoke in enumerate(SMOKES)
])
def test_script_prints_its_figures(smoke: Smoke, bench_environment):
    for backend in smoke.backends:
        require_backend(backend)
    args = [*smoke.args, *(["--redis-db", os.environ.get("TEST_REDIS_DB", "15")] if smoke.redis_db else [])]
    environment = {**bench_environment, **smoke.env, "BENCH_EXPLORE_DB": f"bench_explore_{os.getpid()}"}
    output = run_script(smoke.script, args, environment)
    assert_figures(smoke.script, output, smoke.figures)


def test_load_script_measures_a_server(live_server, transactional_db):
    """scripts/bench_load.py against a server (here the tests' live server) with one public attempt."""
    from tests.replay.factories import make_attempt

    attempt = make_attempt()
    output = run_script("bench_load.py", ["--base-url", live_server.url, "--attempt", str(attempt.pk), "--requests", "2",
                                          "--concurrency", "1"], {**os.environ, "LOG_LEVEL": "WARNING"})
    figure = (rf"^  2 requests, concurrency 1: 0 errors, p50 {MS}, p95 {MS}, max {MS}, {NUMBER} requests/s, "
              rf"{NUMBER} KiB per response; warm-up request: 200 in {MS}$")
    assert_figures("bench_load.py", output, [rf"^{re.escape(live_server.url + path)}\n{figure}"
                                             for path in ("/", "/?format=json", f"/attempts/{attempt.pk}/")])
