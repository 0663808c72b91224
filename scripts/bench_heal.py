#!/usr/bin/env python3
"""How long a run takes to heal by itself: an attempt whose worker and work horse are SIGKILLed
mid-attempt, from the kill until the attempt is finished (re-queued by a long-running worker's
scheduled recovery, retried after the back-off, executed). Target: under 2 minutes.

    .venv/bin/python scripts/bench_heal.py [--scenario same-host,lost-machine]

Two scenarios, with every setting at its default (ATTEMPT_RECOVER_INTERVAL_SECONDS=30,
ATTEMPT_STALE_SECONDS=60, ATTEMPT_RETRY_BACKOFF_SECONDS=10) unless set in the environment:

- same-host: the dead worker ran on the healer's machine, where its dead process is seen at once;
  the wait is for the next recovery round (at most the interval) and the back-off;
- lost-machine: the dead worker's claim names another host, as when a whole machine is lost;
  only its silence tells: the heartbeat goes stale (60 s), then the next round, then the back-off.

Uses real RQ workers (`manage.py evaluation_worker`, subprocesses; the worker class of the tests, for the
`gated_gold` agent that holds an attempt open until a file is removed), Redis database 13 (flushed;
--redis-db to choose another) of $REDIS_URL's server, the bubblewrap sandbox, and a scratch Postgres database `bench_heal_<pid>`
on $BENCH_DATABASE_URL's server (default postgres://postgres@127.0.0.1:5432/postgres), migrated
and dropped at the end. Takes about three minutes.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import scratch_deployment, wait_until, worker_command  # noqa: E402 - beside this script

REDIS_DB = 13
TARGET_SECONDS = 120
WORKER_CLASS = "tests.evaluation.agents.WorkerWithTestAgents"  # runs.evaluation.worker.EvaluationWorker + test agents


def _worker(env: dict, log: Path, *, burst: bool) -> subprocess.Popen:
    command = worker_command(burst=burst, worker_class=WORKER_CLASS)
    with open(log, "w") as output:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)


def scenario(name: str, *, suite, env: dict, scratch: Path) -> dict:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="same-host,lost-machine", help="same-host, lost-machine or both (default)")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    args = parser.parse_args()
    names = [part.strip() for part in args.scenario.split(",") if part.strip()]
    unknown = set(names) - {"same-host", "lost-machine"}
    if unknown:
        raise SystemExit(f"--scenario: unknown {', '.join(sorted(unknown))}; use same-host, lost-machine or both")

    from sandbox import backend_problem

    problem = backend_problem("bubblewrap")
    if problem:
        raise SystemExit(f"the bubblewrap sandbox is unavailable: {problem}")

    with scratch_deployment("heal", backend="bubblewrap", redis_db=args.redis_db) as (env, scratch):
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
            f"{settings.ATTEMPT_STALE_SECONDS} s, first retry after {settings.ATTEMPT_RETRY_BACKOFF_SECONDS} s"
        )
        results = []
        for scenario_name in names:
            print(f"running {scenario_name}...", file=sys.stderr, flush=True)
            results.append(scenario(scenario_name, suite=suite, env=env, scratch=scratch))
        print(f"{'scenario':<14} {'kill to finished':>17}  {'target':>7}  status  passed  tries  runs of try 2  recovered because")
        for result in results:
            verdict = "ok" if result["seconds"] < TARGET_SECONDS else "OVER"
            print(
                f"{result['scenario']:<14} {result['seconds']:>15.1f} s  {verdict:>7}  {result['status']:<6}  "
                f"{str(result['passed']):<6}  {result['tries']:>5}  {result['runs_of_second_try']:>13}  {result['reason']}"
            )


if __name__ == "__main__":
    main()
