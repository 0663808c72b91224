#!/usr/bin/env python3
"""How long a run takes to heal by itself, from a fault until the run is finished, and how many of
its attempts were run twice (to their end by two tries). Targets: under 2 minutes, and 0.

    .venv/bin/python scripts/bench_heal.py [--scenario same-host,lost-machine,redis-lost,...]

Every setting at its default (ATTEMPT_RECOVER_INTERVAL_SECONDS=30, ATTEMPT_STALE_SECONDS=60,
ATTEMPT_RETRY_BACKOFF_SECONDS=10, ATTEMPT_LOST_JOB_GRACE_SECONDS=20) unless set in the environment.
Scenarios (all by default):

- same-host: one attempt; its worker and work horse SIGKILLed mid-attempt, on the healer's machine,
  where the dead process is seen at once: the wait is for the next recovery round of another,
  long-running worker (at most the interval) and the back-off;
- lost-machine: the same, the dead worker's claim naming another host, as when a whole machine is
  lost; only its silence tells: the heartbeat goes stale (60 s), then the next round, the back-off;
- redis-lost: a run of three attempts (--attempts) under `make serve`'s worker (honcho running the Procfile's
  worker line: one supervised worker); Redis restarted, empty, while the first attempt is under way
  and the other two wait: their jobs are gone, and only the healing queues them again;
- postgres-restarted: the same run; Postgres restarted (every connection dropped) meanwhile;
- serve-worker-killed: the same run; the worker's main process SIGKILLed mid-attempt: its supervisor
  ends the orphaned horse and starts another worker, which heals the attempt as it starts;
- two-deployments: two deployments (two databases, each its own worker under honcho) sharing one
  Redis database, each running three attempts of the gold baseline: from both runs queued to both
  finished, and how many attempts the other deployment's worker took (target 0).

Uses real RQ workers (the worker class of the tests, for the `gated_gold` agent that holds an attempt
open until a file is removed), the bubblewrap sandbox, Redis database 13 (flushed; --redis-db to
choose another) of $REDIS_URL's server and scratch databases `bench_heal_<pid>` (and `..._b`) on
$BENCH_DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), migrated and
dropped at the end; redis-lost and postgres-restarted put them on a redis-server and a Postgres 15
cluster of the bench's own instead (free ports, tests/evaluation/throwaway.py), which the faults
restart. Takes about eight minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import create_database, scratch_deployment, url_with_path, wait_until, worker_command  # noqa: E402 - beside this script

REDIS_DB = 13
DEFAULT_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"  # as benchlib.scratch_deployment's
TARGET_SECONDS = 120
WORKER_CLASS = "tests.evaluation.agents.WorkerWithTestAgents"  # runs.evaluation.worker.EvaluationWorker + test agents
SCENARIOS = ("same-host", "lost-machine", "redis-lost", "postgres-restarted", "serve-worker-killed", "two-deployments")
# The runs of the fault scenarios and of each deployment: this many attempts (--attempts); in the fault
# scenarios one is under way when the fault comes, the others wait.
FAULT_RUN_ATTEMPTS = 3


def _worker(env: dict, log: Path, *, burst: bool) -> subprocess.Popen:
    command = worker_command(burst=burst, worker_class=WORKER_CLASS)
    with open(log, "w") as output:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)


def kill_scenario(name: str, *, suite, env: dict, scratch: Path) -> dict:
    """One attempt, its worker killed mid-attempt; seconds from the kill until it is finished."""
    import redis
    from rq import Worker

    from runs.evaluation.kinds import RUN_ATTEMPT
    from runs.evaluation.queue import attempts_enqueue, evaluation_queue
    from runs.evaluation.services import run_create
    from runs.models import Attempt

    redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    gate = scratch / f"gate-{name}"
    gate.touch()
    logs = scratch / name
    logs.mkdir()
    run = run_create(suite=suite, agent="gated_gold", n_values=[1], sample_cap=1, enqueue=False, description=f"bench_heal {name}")
    victim, *others = run.attempts.order_by("pk")
    Attempt.objects.filter(pk__in=[a.pk for a in others]).delete()  # one attempt is all it takes
    attempts_enqueue(attempts=[victim])

    worker_env = {**env, "EVAL_TEST_GATE": str(gate)}
    doomed = _worker(worker_env, logs / "doomed.log", burst=True)
    healer = None
    try:
        wait_until(lambda: Attempt.objects.filter(pk=victim.pk, status=Attempt.RUNNING).exists(), timeout=120, what="the attempt under way", logs=logs)
        healer = _worker(worker_env, logs / "healer.log", burst=False)
        queue = evaluation_queue()
        wait_until(lambda: any(w.get_state() == "idle" for w in Worker.all(queue=queue)), timeout=120, what="the healer idle", logs=logs)
        victim.refresh_from_db()
        horse = int(victim.claimed_by.rsplit(":", 1)[1])
        if name == "lost-machine":
            Attempt.objects.filter(pk=victim.pk).update(claimed_by=f"lost-machine:{horse}")
        doomed.kill()
        os.kill(horse, 9)
        killed = time.monotonic()
        doomed.wait(timeout=30)
        gate.unlink()
        wait_until(
            lambda: Attempt.objects.filter(pk=victim.pk, status__in=[Attempt.DONE, Attempt.ERROR]).exists(),
            timeout=600, what="the attempt finished", logs=logs,
        )
        seconds = time.monotonic() - killed
    finally:
        for process in (doomed, healer):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    victim.refresh_from_db()
    second_try = evaluation_queue().fetch_job(RUN_ATTEMPT.job_id(victim.pk, 1))
    return {
        "scenario": name,
        "seconds": seconds,
        "status": victim.status,
        "passed": victim.passed,
        "tries": victim.tries,
        "reason": victim.infra_history[0]["reason"] if victim.infra_history else "",
        "runs_of_second_try": len(second_try.results()) if second_try is not None else 0,
    }


def _safely(query, default=None):
    """query() on the database, or `default` while it cannot be reached (it is restarting): the
    connection is dropped then, and opened again by the next query."""
    from django.db import InterfaceError, OperationalError, connection

    try:
        return query()
    except (OperationalError, InterfaceError):
        connection.close()
        return default


def _serve_worker(env: dict, scratch: Path, log: Path) -> subprocess.Popen:
    """`make serve`'s worker: honcho running the Procfile's worker line (RQ_WORKERS=1), with the
    tests' worker class added for the gated agent."""
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("worker:"))
    procfile = scratch / f"Procfile-{log.stem}"
    procfile.write_text(f"{line} --worker-class {WORKER_CLASS}\n")
    bin_dir = Path(sys.executable).parent
    environment = {**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}"}  # as `make serve` puts the venv first
    with open(log, "w") as output:
        return subprocess.Popen([str(bin_dir / "honcho"), "-f", str(procfile), "-d", str(ROOT), "start", "worker"],
                                env=environment, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    """Stop honcho as Ctrl-C would (SIGTERM; it gives its processes 5 s), then anything left."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _completed_tries(workspace_root: Path, attempt_id: int) -> int:
    """How many tries of an attempt ran to their end (their trajectory records when it ended)."""
    return sum(
        1 for path in (workspace_root / "trajectories").glob(f"attempt-{attempt_id}-try-*.json")
        if json.loads(path.read_text()).get("header", {}).get("ended_at")
    )


def fault_scenario(name: str, *, suite, env: dict, scratch: Path, services, attempts: int) -> dict:
    """A run of `attempts` gated attempts under `make serve`'s worker; the fault comes while the
    first is under way; seconds from the fault until every attempt has ended."""
    from runs.evaluation.claims import local_pid
    from runs.evaluation.queue import attempts_enqueue
    from runs.evaluation.services import run_create
    from runs.models import Attempt
    from tests.evaluation.throwaway import parent_pid

    gate = scratch / f"gate-{name}"
    gate.touch()
    logs = scratch / name
    logs.mkdir()
    run = run_create(suite=suite, agent="gated_gold", n_values=[1], sample_cap=1, enqueue=False, description=f"bench_heal {name}")
    keep = list(run.attempts.order_by("pk")[:attempts])
    run.attempts.exclude(pk__in=[a.pk for a in keep]).delete()
    attempts_enqueue(attempts=keep)
    worker_env = {**env, "EVAL_TEST_GATE": str(gate)}
    serve = _serve_worker(worker_env, scratch, logs / "serve.log")
    try:
        first = wait_until(lambda: run.attempts.filter(status=Attempt.RUNNING).first(), timeout=180,
                           what="the first attempt under way", logs=logs)
        fault = time.monotonic()
        if name == "redis-lost":
            services["redis"].stop()
            services["redis"].start()
        elif name == "postgres-restarted":
            services["postgres"].stop()
            services["postgres"].start()
        else:  # serve-worker-killed: the worker (the horse's parent), not its supervisor nor its horse
            os.kill(parent_pid(local_pid(first.claimed_by)), signal.SIGKILL)
        gate.unlink()
        wait_until(
            lambda: _safely(lambda: not run.attempts.filter(status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists(), False),
            timeout=600, what="the run finished", logs=logs,
        )
        seconds = time.monotonic() - fault
    finally:
        _stop(serve)
    ended = list(run.attempts.all())
    workspace_root = Path(env["WORKSPACE_ROOT"])
    return {
        "scenario": name,
        "seconds": seconds,
        "done": sum(a.status == Attempt.DONE and a.passed for a in ended),
        "total": len(ended),
        "run_twice": sum(_completed_tries(workspace_root, a.pk) > 1 for a in ended),
        "tried_again": sum(a.tries > 1 for a in ended),
        "note": "; ".join(sorted({a.infra_history[-1]["reason"].splitlines()[0][:90] for a in ended if a.infra_history})),
    }


# Run in the other deployment (manage.py shell -c): the same run as this process makes in its own.
OTHER_DEPLOYMENT_RUN = """
from runs.evaluation.queue import attempts_enqueue
from runs.evaluation.services import run_create
from runs.models import Suite
run = run_create(suite=Suite.objects.get(name="builtin"), agent="gold", n_values=[1], sample_cap=1, enqueue=False,
                 description="bench_heal deployment b")
keep = list(run.attempts.order_by("pk")[:{attempts}])
run.attempts.exclude(pk__in=[a.pk for a in keep]).delete()
attempts_enqueue(attempts=keep)
"""


def two_deployments(*, suite, env: dict, scratch: Path, admin_url: str, attempts: int) -> dict:
    """Two deployments on one Redis database, each with its own worker and a run of `attempts` gold
    attempts: seconds from both queued to both finished."""
    import psycopg
    from rq import Worker

    from runs.evaluation.queue import attempts_enqueue, evaluation_queue
    from runs.evaluation.services import run_create
    from runs.models import Attempt

    logs = scratch / "two-deployments"
    logs.mkdir()
    other_name = f"{Path(env['DATABASE_URL']).name}_b"
    create_database(admin_url, other_name)
    other = {
        **env, "DATABASE_URL": url_with_path(admin_url, f"/{other_name}"), "WORKSPACE_ROOT": str(scratch / "workspaces-b"),
        "WORKER_HOST_NAME": "deployment-b",
    }
    ours = {**env, "WORKER_HOST_NAME": "deployment-a"}
    for command in (["migrate", "--no-input"], ["import_suite", "runs/suites/builtin", "--samples", "1"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=other, check=True, stdout=subprocess.DEVNULL)
    connection = evaluation_queue().connection
    connection.flushdb()
    serving = [_serve_worker(ours, scratch, logs / "a.log"), _serve_worker(other, scratch, logs / "b.log")]
    try:
        wait_until(lambda: sum(w.get_state() == "idle" for w in Worker.all(connection=connection)) == 2, timeout=180,
                   what="both deployments' workers listening", logs=logs)
        started = time.monotonic()
        subprocess.run([sys.executable, "manage.py", "shell", "-c", OTHER_DEPLOYMENT_RUN.format(attempts=attempts)],
                       cwd=ROOT, env=other, check=True, stdout=subprocess.DEVNULL)
        run = run_create(suite=suite, agent="gold", n_values=[1], sample_cap=1, enqueue=False, description="bench_heal deployment a")
        keep = list(run.attempts.order_by("pk")[:attempts])
        run.attempts.exclude(pk__in=[a.pk for a in keep]).delete()
        attempts_enqueue(attempts=keep)

        def other_attempts():
            with psycopg.connect(other["DATABASE_URL"]) as database:
                return database.execute("SELECT id, status, passed, claimed_by, tries FROM runs_attempt").fetchall()

        def finished():
            return (not run.attempts.filter(status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists()
                    and all(row[1] not in (Attempt.QUEUED, Attempt.RUNNING) for row in other_attempts()))

        wait_until(finished, timeout=600, what="both runs finished", logs=logs)
        seconds = time.monotonic() - started
    finally:
        for process in serving:
            _stop(process)
    mine = list(run.attempts.all())
    theirs = other_attempts()
    crossed = sum(not a.claimed_by.startswith("deployment-a:") for a in mine)
    crossed += sum(not claimed_by.startswith("deployment-b:") for _, _, _, claimed_by, _ in theirs)
    run_twice = sum(_completed_tries(Path(ours["WORKSPACE_ROOT"]), a.pk) > 1 for a in mine)
    run_twice += sum(_completed_tries(Path(other["WORKSPACE_ROOT"]), pk) > 1 for pk, *_ in theirs)
    return {
        "scenario": "two-deployments",
        "seconds": seconds,
        "done": sum(a.status == Attempt.DONE and a.passed for a in mine) + sum(s == Attempt.DONE and p for _, s, p, _, _ in theirs),
        "total": len(mine) + len(theirs),
        "run_twice": run_twice,
        "tried_again": sum(a.tries > 1 for a in mine) + sum(tries > 1 for *_, tries in theirs),
        "note": f"{crossed} attempt(s) taken by the other deployment's worker; from both runs queued",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=",".join(SCENARIOS), help=f"a comma-separated list of {', '.join(SCENARIOS)} (default all)")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    parser.add_argument("--attempts", type=int, default=FAULT_RUN_ATTEMPTS,
                        help=f"attempts of each run of the fault scenarios and of each deployment (default {FAULT_RUN_ATTEMPTS}, at least 2)")
    args = parser.parse_args()
    names = [part.strip() for part in args.scenario.split(",") if part.strip()]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"--scenario: unknown {', '.join(sorted(unknown))}; use any of {', '.join(SCENARIOS)}")
    if args.attempts < 2:
        raise SystemExit(f"--attempts {args.attempts}: at least 2 (one under way when the fault comes, one waiting)")

    from sandbox import backend_problem

    problem = backend_problem("bubblewrap")
    if problem:
        raise SystemExit(f"the bubblewrap sandbox is unavailable: {problem}")

    from tests.evaluation.throwaway import ThrowawayPostgres, ThrowawayRedis

    # The faults restart a Redis and a Postgres of the bench's own, never the servers it was given.
    services_dir = Path(tempfile.mkdtemp(prefix="bench-heal-services-"))
    services = {}
    os.environ.pop("DEPLOYMENT_ID", None)  # each deployment's own, from its database
    try:
        if "redis-lost" in names:
            services["redis"] = ThrowawayRedis(services_dir)
            services["redis"].start()
            os.environ["REDIS_URL"] = services["redis"].url
        if "postgres-restarted" in names:
            services["postgres"] = ThrowawayPostgres()
            services["postgres"].init()
            services["postgres"].start()
            template = os.environ.get("BENCH_TEMPLATE_DATABASE")
            if template:  # scratch databases are copies of it (benchlib.create_database): it moves along
                given = os.environ.get("BENCH_DATABASE_URL", DEFAULT_ADMIN_URL)
                services["postgres"].copy_database(url_with_path(given, f"/{template}"), template)
            os.environ["BENCH_DATABASE_URL"] = services["postgres"].url()
        with scratch_deployment("heal", backend="bubblewrap", redis_db=args.redis_db) as (env, scratch):
            results = _run(names, env=env, scratch=scratch, services=services, attempts=args.attempts)
    finally:
        if "redis" in services:
            services["redis"].stop()
        if "postgres" in services:
            services["postgres"].remove()
        shutil.rmtree(services_dir, ignore_errors=True)

    kills = [result for result in results if "kill_to_finished" in result]
    faults = [result for result in results if "kill_to_finished" not in result]
    if kills:
        print(f"{'scenario':<14} {'kill to finished':>17}  {'target':>7}  status  passed  tries  runs of try 2  recovered because")
        for result in kills:
            verdict = "ok" if result["kill_to_finished"] < TARGET_SECONDS else "OVER"
            print(
                f"{result['scenario']:<14} {result['kill_to_finished']:>15.1f} s  {verdict:>7}  {result['status']:<6}  "
                f"{str(result['passed']):<6}  {result['tries']:>5}  {result['runs_of_second_try']:>13}  {result['reason']}"
            )
    if faults:
        print(f"{'scenario':<20} {'fault to finished':>18}  {'target':>6}  {'done':>5}  {'run twice':>9}  {'tried again':>11}  note")
        for result in faults:
            verdict = "ok" if result["seconds"] < TARGET_SECONDS and result["run_twice"] == 0 else "OVER"
            print(
                f"{result['scenario']:<20} {result['seconds']:>16.1f} s  {verdict:>6}  {result['done']:>2}/{result['total']:<2}  "
                f"{result['run_twice']:>9}  {result['tried_again']:>11}  {result['note']}"
            )


def _run(names: list[str], *, env: dict, scratch: Path, services: dict, attempts: int) -> list[dict]:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    import tests.evaluation.agents  # noqa: F401 - registers gated_gold here too
    from runs.models import Suite

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("import_suite", str(ROOT / "runs/suites/builtin"), "--samples", "1", stdout=quiet)
    suite = Suite.objects.get(name="builtin")
    print(
        f"settings: recovery every {settings.ATTEMPT_RECOVER_INTERVAL_SECONDS} s, heartbeat stale after "
        f"{settings.ATTEMPT_STALE_SECONDS} s, first retry after {settings.ATTEMPT_RETRY_BACKOFF_SECONDS} s, "
        f"lost jobs queued again after {settings.ATTEMPT_LOST_JOB_GRACE_SECONDS} s"
    )
    results = []
    for name in names:
        print(f"running {name}...", file=sys.stderr, flush=True)
        if name in ("same-host", "lost-machine"):
            result = kill_scenario(name, suite=suite, env=env, scratch=scratch)
            result["kill_to_finished"] = result.pop("seconds")
        elif name == "two-deployments":
            result = two_deployments(suite=suite, env=env, scratch=scratch, admin_url=os.environ.get("BENCH_DATABASE_URL", DEFAULT_ADMIN_URL),
                                     attempts=attempts)
        else:
            result = fault_scenario(name, suite=suite, env=env, scratch=scratch, services=services, attempts=attempts)
        results.append(result)
    return results


if __name__ == "__main__":
    main()
