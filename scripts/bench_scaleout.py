#!/usr/bin/env python3
"""Scale-out shown: two worker "hosts" share one gold run of the built-in suite through Postgres and
Redis alone, each with its own name (WORKER_HOST_NAME), workspace root and sandbox (host A bubblewrap,
host B Docker); with --kill, host A is SIGKILLed mid-run and host B's self-healing takes over.

    .venv/bin/python scripts/bench_scaleout.py [--n 1] [--cap 100] [--attempts N] [--kill]

Real RQ workers (`manage.py evaluation_worker`, subprocesses), Redis database 12 (or --redis-db; flushed) of $REDIS_URL's
server and a scratch Postgres database `bench_scaleout_<pid>` on $BENCH_DATABASE_URL's server,
dropped at the end. Prints, per host, the attempts it claimed, the sandbox they ran in and where their
files lived, and checks that every attempt was done exactly once. The run is created with backend
`any`: each attempt runs in the sandbox of the host that claims it.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import attempts_cut, scratch_deployment, wait_until, worker_command  # noqa: E402 - beside this script

REDIS_DB = 12
HOSTS = {"host-a": "bubblewrap", "host-b": "docker"}
# Beats every second, taken for dead after 10 s without one; each host heals every 2 s.
HEALING = {"ATTEMPT_HEARTBEAT_SECONDS": "1", "ATTEMPT_STALE_SECONDS": "10", "ATTEMPT_RECOVER_INTERVAL_SECONDS": "2",
           "ATTEMPT_RETRY_BACKOFF_SECONDS": "0"}


def start_host(host: str, *, env: dict, scratch: Path, burst: bool) -> subprocess.Popen:
    root = scratch / host / "workspaces"
    root.mkdir(parents=True, exist_ok=True)
    command = worker_command(burst=burst)
    host_env = {**env, **HEALING, "WORKER_HOST_NAME": host, "WORKSPACE_ROOT": str(root), "SANDBOX_BACKEND": HOSTS[host]}
    log = open(scratch / f"{host}.log", "w")  # noqa: SIM115 - the worker writes to it until it ends
    return subprocess.Popen(command, cwd=ROOT, env=host_env, stdout=log, stderr=subprocess.STDOUT)


def host_of(claimed_by: str) -> str:
    return claimed_by.rpartition(":")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1, help="masked functions per sample (default 1)")
    parser.add_argument("--cap", type=int, default=100, help="samples per paper (default 100: all 7 at n=1)")
    parser.add_argument("--kill", action="store_true", help="SIGKILL host A (worker and work horse) mid-run")
    parser.add_argument("--attempts", type=int, help="keep only this many attempts, those with the fewest experiments (a smoke run)")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    args = parser.parse_args()

    from sandbox import backend_problem

    for backend in HOSTS.values():
        if problem := backend_problem(backend):
            raise SystemExit(f"sandbox {backend} unavailable: {problem}")

    with scratch_deployment("scaleout", backend="bubblewrap", redis_db=args.redis_db) as (env, scratch):
        import django

        django.setup()
        from django.core.management import call_command

        from runs.evaluation.queue import attempts_enqueue
        from runs.evaluation.services import EACH_WORKERS_BACKEND, run_create
        from runs.models import Attempt, Suite

        call_command("migrate", verbosity=0)
        with open(os.devnull, "w") as quiet:
            call_command("import_suite", str(ROOT / "runs/suites/builtin"), "--samples", str(args.n), "--cap", str(args.cap), stdout=quiet)
        run = run_create(suite=Suite.objects.get(name="builtin"), agent="gold", n_values=[args.n], sample_cap=args.cap,
                         sandbox_backend=EACH_WORKERS_BACKEND, enqueue=False)
        attempts_enqueue(attempts=attempts_cut(run, args.attempts))
        started = time.monotonic()
        # With --kill, host B runs long (not --burst): its periodic self-healing finds host A's claims.
        host_a = start_host("host-a", env=env, scratch=scratch, burst=True)
        host_b = start_host("host-b", env=env, scratch=scratch, burst=not args.kill)
        killed = None
        if args.kill:
            def host_a_busy():
                done = run.attempts.filter(claimed_by__startswith="host-a:", status=Attempt.DONE).exists()
                return done and run.attempts.filter(claimed_by__startswith="host-a:", status=Attempt.RUNNING).first()

            killed = wait_until(host_a_busy, timeout=300, what="host A to hold an attempt after finishing one")
            os.kill(host_a.pid, signal.SIGKILL)
            try:
                os.kill(int(killed.claimed_by.rpartition(":")[2]), signal.SIGKILL)  # its work horse
            except ProcessLookupError:
                pass
            print(f"killed host A at {time.monotonic() - started:.1f} s, holding attempt {killed.pk}", file=sys.stderr)
            wait_until(lambda: not run.attempts.filter(status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists(),
                       timeout=900, what="host B to finish the run")
            host_b.terminate()  # a warm shutdown
        for host, process in (("host-a", host_a), ("host-b", host_b)):
            code = process.wait(timeout=900)
            if code != 0 and not (killed and host == "host-a"):
                raise SystemExit(f"{host} exited with {code}:\n{(scratch / f'{host}.log').read_text()[-3000:]}")
        wall = time.monotonic() - started

        attempts = list(run.attempts.order_by("pk"))
        problems = []
        rows: dict[str, dict] = {host: {"claimed": 0, "backends": set(), "local": 0, "held": 0.0} for host in HOSTS}
        for attempt in attempts:
            host = host_of(attempt.claimed_by)
            row = rows[host]
            row["claimed"] += 1
            row["backends"].add((attempt.trajectory or {}).get("header", {}).get("sandbox_backend", "?"))
            row["held"] += (attempt.finished_at - attempt.claimed_at).total_seconds()
            mine = scratch / host / "workspaces" / "trajectories" / f"attempt-{attempt.pk}-try-{attempt.tries}.json"
            others = [scratch / other / "workspaces" / "trajectories" / mine.name for other in HOSTS if other != host]
            row["local"] += mine.is_file() and not any(path.is_file() for path in others)
            expected_tries = 2 if killed is not None and attempt.pk == killed.pk else 1
            if (attempt.status, attempt.passed, attempt.tries) != (Attempt.DONE, True, expected_tries):
                last = attempt.infra_history[-1]["reason"].splitlines()[0][:300] if attempt.infra_history else ""
                problems.append(f"attempt {attempt.pk}: {attempt.status}, passed {attempt.passed}, {attempt.tries} tries {last}")

        print(f"gold baseline, built-in suite, n={args.n}: {len(attempts)} attempts, run backend `any`, {os.cpu_count()} CPUs,"
              f" {wall:.1f} s wall, {60 * len(attempts) / wall:.1f} attempts/min")
        print(f"{'host':<8} {'sandbox':<12} {'attempts':>8} {'files on own root':>17} {'mean claim-to-result s':>23}")
        for host, row in rows.items():
            mean = row["held"] / row["claimed"] if row["claimed"] else 0.0
            print(f"{host:<8} {','.join(sorted(row['backends'])) or '-':<12} {row['claimed']:>8} {row['local']:>17} {mean:>23.2f}")
        if killed is not None:
            killed.refresh_from_db()
            [failure] = killed.infra_history
            print(f"attempt {killed.pk}: try 1 on {host_of(failure['worker'])} ({failure['reason']}); "
                  f"try 2 on {host_of(killed.claimed_by)}, {killed.status}, passed={killed.passed}")
        if problems:
            raise SystemExit("not every attempt was done exactly once:\n" + "\n".join(problems))
        print("every attempt done exactly once and passed")


if __name__ == "__main__":
    main()
