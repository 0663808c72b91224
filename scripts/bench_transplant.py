#!/usr/bin/env python3
"""What judging each masked function alone costs (runs.evaluation.transplants): the `mutant`
baseline (gold with one planted bug) over the built-in suite at n = 2, executed by one real RQ
worker, and for every failed attempt its transplants' time next to the attempt's own re-execution.

    .venv/bin/python scripts/bench_transplant.py [--cap 7] [--n 2] [--attempts N] [--redis-db 13]

Prints, per failed attempt at n, the transplants' sandbox time (workspace, gold bodies put back,
sandbox, experiments) and their job time (claimed to written: fork, claim, bookkeeping included),
each as a ratio of the attempt's own re-execution time, and the verdicts found. Uses a scratch
Postgres database and Redis database 13 (or --redis-db; flushed), like scripts/bench_worker.py; about a minute
for the default 28 attempts on two cores.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import attempts_cut, percentile, scratch_deployment, worker_command  # noqa: E402 - beside this script

REDIS_DB = 13


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2, help="masked functions per sample (default 2)")
    parser.add_argument("--cap", type=int, default=7, help="samples per paper (default 7: 28 attempts)")
    parser.add_argument("--attempts", type=int, help="keep only this many attempts, those with the fewest experiments (a smoke run)")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    args = parser.parse_args()

    from sandbox import backend_problem

    backend = os.environ.get("SANDBOX_BACKEND", "bubblewrap")
    if problem := backend_problem(backend):
        raise SystemExit(f"sandbox {backend} unavailable: {problem}")

    with scratch_deployment("transplant", backend=backend, redis_db=args.redis_db) as (env, scratch):
        import django

        django.setup()
        from django.core.management import call_command

        from runs.evaluation.queue import attempts_enqueue
        from runs.evaluation.services import run_create
        from runs.models import Attempt, Suite, Transplant

        call_command("migrate", verbosity=0)
        with open(os.devnull, "w") as quiet:
            call_command("import_suite", str(ROOT / "runs/suites/builtin"), "--samples", str(args.n), "--cap", str(args.cap), stdout=quiet)
        run = run_create(suite=Suite.objects.get(name="builtin"), agent="mutant", n_values=[args.n], sample_cap=args.cap, enqueue=False)
        attempts_enqueue(attempts=attempts_cut(run, args.attempts))
        print(f"running {run.attempts.count()} mutant attempts at n={args.n} and their transplants on one worker...", file=sys.stderr)
        with open(scratch / "worker.log", "w") as log:
            status = subprocess.run(worker_command(burst=True), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        if status:
            raise SystemExit(f"the worker exited with {status}:\n{(scratch / 'worker.log').read_text()[-3000:]}")

        failed = [a for a in run.attempts.filter(status=Attempt.DONE, reexecution_passed=False).prefetch_related("transplants")]
        sandbox_ratio, job_ratio, own, sandbox_totals = [], [], [], []
        verdicts, diagnoses = Counter(), Counter()
        for attempt in failed:
            transplants = list(attempt.transplants.all())
            if not transplants or not attempt.reexecution_seconds:
                continue
            sandbox = sum(t.sandbox_seconds or 0.0 for t in transplants)
            job = sum((t.finished_at - t.claimed_at).total_seconds() for t in transplants if t.finished_at and t.claimed_at)
            own.append(attempt.reexecution_seconds)
            sandbox_totals.append(sandbox)
            sandbox_ratio.append(sandbox / attempt.reexecution_seconds)
            job_ratio.append(job / attempt.reexecution_seconds)
            verdicts.update(t.verdict or t.status for t in transplants)
            diagnoses[attempt.function_diagnosis] += 1
        passed = run.attempts.filter(passed=True).count()
        print(f"\nbuilt-in suite, mutant at n={args.n}, backend {backend}: {run.attempts.count()} attempts, "
              f"{len(failed)} failed in re-execution, {passed} passed (no transplants)")
        if not sandbox_ratio:
            raise SystemExit("no failed attempt with transplants: nothing to measure")
        print(f"transplants per failed attempt: {args.n}; judged attempts: {len(sandbox_ratio)}")
        print(f"attempt's own re-execution: median {statistics.median(own):.2f} s")
        print(f"transplants' sandbox time:  median {statistics.median(sandbox_totals):.2f} s per attempt")
        for name, ratios in (("sandbox time", sandbox_ratio), ("job time", job_ratio)):
            print(f"transplant cost / own re-execution ({name}): median {statistics.median(ratios):.2f}x, "
                  f"p95 {percentile(ratios, 0.95):.2f}x, mean {statistics.fmean(ratios):.2f}x")
        print("verdicts: " + ", ".join(f"{name} {count}" for name, count in sorted(verdicts.items())))
        print("attempts: " + ", ".join(f"{name or 'none'} {count}" for name, count in sorted(diagnoses.items())))
        unsettled = Transplant.objects.filter(attempt__run=run).exclude(status__in=[Transplant.Status.DONE, Transplant.Status.GIVEN_UP]).count()
        if unsettled:
            raise SystemExit(f"{unsettled} transplants were not settled: see {scratch / 'worker.log'}")


if __name__ == "__main__":
    main()
