#!/usr/bin/env python3
"""Throughput of the evaluation workers: attempts per minute for the `gold` baseline on the built-in
suite with one RQ worker and with two, and where an attempt's time goes (harness overhead next to
the time the experiments themselves take); what the held-out checks add to a re-execution, for
attempts that pass (gold) and attempts that fail (a `noop` run with one worker).

    .venv/bin/python scripts/bench_worker.py [--n 1] [--cap 100] [--workers 1,2] [--repeat 3] [--attempts N] [--check-repeats 15]
        [--redis-db 14] [--live-seconds 2] [--live-rounds 1]

Uses real RQ workers (`manage.py evaluation_worker --burst`, subprocesses), Redis database 14 (or --redis-db; flushed) of
$REDIS_URL's server, the sandbox of $SANDBOX_BACKEND (bubblewrap by default) and a scratch Postgres
database `bench_worker_<pid>` created on $BENCH_DATABASE_URL's server (default
postgres://postgres@127.0.0.1:5432/postgres), migrated, and dropped at the end. Takes about two
minutes for n=1 (28 attempts per worker count) on two cores.

This machine's speed drifts from minute to minute (a virtual machine sharing its host), so with
--repeat the worker counts are run in turn that many times (every other round in reverse order), and
the scaling figures are given per round and as their median.

Then what streaming a running attempt's trajectory to the database costs (runs.evaluation.live):
the gold run with one worker, with ATTEMPT_LIVE_SECONDS=0 and with --live-seconds, --live-rounds
times in turn; the overhead is the difference in an attempt's time, claim to result written.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import attempts_cut, scratch_deployment, worker_command  # noqa: E402 - beside this script

REDIS_DB = 14


def bench(count: int, *, suite, n: int, cap: int, keep: int | None, env: dict, logs: Path, agent: str = "gold") -> dict:
    """One run of `agent` over the suite's samples, executed by `count` burst workers."""
    import redis
    from django.db.models import Max, Min

    from runs.evaluation.queue import attempts_enqueue
    from runs.evaluation.services import run_create

    redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    run = run_create(suite=suite, agent=agent, n_values=[n], sample_cap=cap, enqueue=keep is None)  # jobs enqueued on commit
    if keep is not None:
        attempts_enqueue(attempts=attempts_cut(run, keep))
    started = time.monotonic()
    processes = []
    for index in range(count):
        log = logs / f"worker-{count}-{index}.log"
        with open(log, "w") as output:
            processes.append((subprocess.Popen(worker_command(burst=True), cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT), log))
    for process, log in processes:
        if process.wait() != 0:
            raise SystemExit(f"a worker exited with {process.returncode}:\n{log.read_text()[-3000:]}")
    wall = time.monotonic() - started
    attempts = list(run.attempts.all())
    span = run.attempts.aggregate(first=Min("claimed_at"), last=Max("finished_at"))
    steady = (span["last"] - span["first"]).total_seconds()
    load = os.getloadavg()[0]
    return {"workers": count, "run": run, "attempts": attempts, "wall": wall, "steady": steady, "load": load}


def _mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def report(results: list[dict], *, n: int, backend: str) -> None:
    total = len(results[0]["attempts"])
    print(f"gold baseline, built-in suite, n={n}: {total} attempts per run, sandbox {backend}, {os.cpu_count()} CPUs")
    print()
    print(f"{'round':>5}  {'workers':>7}  {'wall s':>7}  {'attempts/min':>12}  {'steady s':>8}  {'attempts/min':>12}  {'load':>5}  passed")
    print(f"{'':>5}  {'':>7}  {'':>7}  {'(wall)':>12}  {'':>8}  {'(steady)':>12}")
    for result in results:
        done = len(result["attempts"])
        passed = sum(a.passed for a in result["attempts"])
        print(
            f"{result['round']:>5}  {result['workers']:>7}  {result['wall']:>7.1f}  {60 * done / result['wall']:>12.1f}  "
            f"{result['steady']:>8.1f}  {60 * done / result['steady']:>12.1f}  {result['load']:>5.1f}  {passed}/{done}"
        )
    print("  wall: from starting the workers (process start-up included) until the last one quit;")
    print("  steady: from the first claim to the last attempt written; load: 1-minute load average after.")
    print()
    counts = sorted({result["workers"] for result in results})
    for count in counts[1:]:
        for measure in ("wall", "steady"):
            ratios = [
                base[measure] / other[measure]
                for base, other in zip(
                    (r for r in results if r["workers"] == counts[0]), (r for r in results if r["workers"] == count)
                )
            ]
            print(f"scaling, {count} workers vs {counts[0]} ({measure}): "
                  f"{', '.join(f'{ratio:.2f}x' for ratio in ratios)} per round; median {statistics.median(ratios):.2f}x")
    print()

    for count in counts:
        rounds = [result for result in results if result["workers"] == count]
        attempts = [attempt for result in rounds for attempt in result["attempts"]]

        def timing(key, attempts=attempts):
            return _mean(a.timings.get(key, 0.0) for a in attempts)

        workspaces = timing("workspace") + timing("reexecution_workspace")
        sandboxes = sum(
            timing(k) for k in ("sandbox_open", "sandbox_close", "reexecution_sandbox_open", "reexecution_sandbox_close")
        )
        patch = timing("reexecution_patch")
        scoring = timing("scoring") + timing("reexecution_scoring")
        harness = timing("harness")
        experiments = timing("experiments")
        held = _mean((a.finished_at - a.claimed_at).total_seconds() for a in attempts)
        rows = [
            ("experiments run by the harness (re-execution)", experiments),
            ("agent (gold: restores the bodies, runs the experiments itself)", timing("agent")),
            ("harness overhead, all of it", harness),
            ("  workspaces (the agent's; the re-execution's, built meanwhile, waited for)", workspaces),
            ("  sandboxes opened and closed (two)", sandboxes),
            ("  applying the final patch", patch),
            ("  scoring (both verdicts)", scoring),
            ("  bookkeeping in between", max(0.0, harness - workspaces - sandboxes - patch - scoring)),
            ("claim to result written", held),
        ]
        if count == 1:
            steady = sum(result["steady"] for result in rounds)
            rows.append(("worker cost per job beyond that (fork, claim, queue)", steady / len(attempts) - held))
        print(f"Per attempt with {count} worker(s), mean over {len(attempts)} attempts:")
        width = 76
        for label, seconds in rows:
            print(f"  {label:<{width}}  {seconds * 1000:9.1f} ms")
        if experiments:
            print(f"  harness overhead = {100 * harness / experiments:.1f}% of the experiments' own time")
        print()


def report_streaming(off: list[dict], on: list[dict], *, live_seconds: int) -> None:
    """What storing a running attempt's trajectory live (runs.evaluation.live) costs: the same run with
    ATTEMPT_LIVE_SECONDS=0 (stored at the end only) and with it on, one worker, rounds in turn; and
    the streaming's own time, measured in the worker (timings live_stream, live_writes)."""
    def held(results) -> float:
        return _mean((a.finished_at - a.claimed_at).total_seconds() for r in results for a in r["attempts"])

    attempts = [a for r in on for a in r["attempts"]]
    count = len(off[0]["attempts"])
    print(f"Streaming trajectories live (ATTEMPT_LIVE_SECONDS={live_seconds} against 0), 1 worker, {count} attempts a run, "
          f"{len(on)} round(s):")
    per_round = []
    for round_off, round_on in zip(off, on):
        before, after = held([round_off]), held([round_on])
        per_round.append(100 * (after - before) / before)
        print(f"  round {round_off['round']}: claim to result written {before * 1000:.1f} ms off, {after * 1000:.1f} ms on: "
              f"{per_round[-1]:+.1f}%")
    own = _mean(a.timings.get("live_stream", 0.0) for a in attempts)
    writes = _mean(a.timings.get("live_writes", 0.0) for a in attempts)
    total = held(on)
    print(f"  streaming overhead = {statistics.median(per_round):+.1f}% of an attempt's time (median of the rounds; target <= 5%)")
    print(f"  its own work: {writes:.1f} writes an attempt, {own * 1000:.1f} ms = {100 * own / total:.2f}% of an attempt's time "
          "(in the heartbeat's thread, beside the agent)")
    print()


def report_held_out(passed_attempts, failed_attempts) -> None:
    """The held-out checks' cost: for attempts that passed the public experiments, the re-execution's
    time in the check against its variants' own running time; for failed ones, whether any ran, and
    the one thing every re-execution pays (reading the sample's variants)."""
    from runs.suites.selectors import sample_held_out_checks, sample_task

    checked = [a for a in passed_attempts if "reexecution_held_out" in a.timings]
    print("Held-out checks (hidden variants run by the re-execution):")
    if checked:
        check = _mean(a.timings["reexecution_held_out"] for a in checked)
        own = _mean(a.timings["reexecution_held_out_experiments"] for a in checked)
        print(f"  passed attempts that ran them: {len(checked)}/{len(passed_attempts)}; per attempt: check {check * 1000:.1f} ms, "
              f"the variants' own commands {own * 1000:.1f} ms: +{100 * (check - own) / own:.1f}% (target <= 10%)")
    ran = sum("reexecution_held_out" in a.timings for a in failed_attempts)
    print(f"  failed attempts (noop) that ran them: {ran}/{len(failed_attempts)} (target 0)")
    sample = failed_attempts[0].sample
    experiments = sample_task(sample=sample).experiments
    print(f"  reading a sample's variants, paid by every re-execution: {_median_ms(lambda: sample_held_out_checks(experiments=experiments)):.2f} ms")
    print()


def _median_ms(action, repeat: int = 15) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def report_check_costs(attempts, *, scratch: Path, repeat: int) -> None:
    """What the hostile-agent checks cost per use, next to what they replaced, on one gold attempt's
    workspace: descriptor-based snapshots (sandbox.fs) against a plain os.walk that follows links,
    the scoped final patch (runs.benchmark.patches + runs.benchmark.scope) against GNU patch applying it whole, and the
    link-safe iterative removal against shutil.rmtree."""
    from runs.agents.recorder import snapshot
    from runs.evaluation.verdicts import scoped_final_code
    from runs.suites.services import workspace_build
    from sandbox import fs

    attempt = next(a for a in attempts if a.final_patch)

    def median_ms(action) -> float:
        return _median_ms(action, repeat)
    build = scratch / "checks"

    def fresh() -> Path:
        fs.remove_tree(build)
        workspace_build(sample=attempt.sample, dest=build, context="full")
        return build

    def plain_walk() -> None:
        for directory, _, files in os.walk(fresh_workspace):
            for name in files:
                with open(os.path.join(directory, name), "rb") as handle:
                    handle.read()

    def gnu_patch() -> None:
        workspace = fresh()
        subprocess.run(["patch", "-p1", "--force", "-s", "-d", str(workspace)], input=attempt.final_patch,
                       text=True, check=True, capture_output=True)

    def scoped() -> None:
        workspace = fresh()
        error, _ = scoped_final_code(patch=attempt.final_patch, workspace=workspace)
        assert error is None, error

    fresh_workspace = fresh()
    files = sum(1 for entry in fs.Walk(fresh_workspace) if entry.kind == "file")
    build_ms = median_ms(fresh)
    rows = [
        (f"workspace snapshot, {files} files (sandbox.fs)", median_ms(lambda: snapshot(fresh_workspace)),
         "os.walk + read, following links", median_ms(plain_walk)),
        ("final patch parsed, applied and scoped (runs.benchmark.patches, runs.benchmark.scope)", median_ms(scoped) - build_ms,
         "GNU patch, whole patch", median_ms(gnu_patch) - build_ms),
        ("workspace removed (fs.remove_tree)", median_ms(lambda: fs.remove_tree(fresh())) - build_ms,
         "shutil.rmtree", median_ms(lambda: shutil.rmtree(fresh())) - build_ms),
    ]
    print(f"Cost of the hostile-agent checks, per use (median of {repeat}, on one gold attempt's workspace):")
    for label, ours, before_label, before in rows:
        print(f"  {label:<66} {ours:7.2f} ms   (before: {before_label} {before:.2f} ms)")
    print("  An attempt takes one snapshot per agent step and one for the final patch, one scoped patch and two")
    print("  removals; the Docker backend adds one read of the container's pids.current per command.")
    fs.remove_tree(build)
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1, help="masked functions per sample (default 1)")
    parser.add_argument("--cap", type=int, default=100, help="samples per paper (default 100: all 7 at n=1)")
    parser.add_argument("--workers", default="1,2", help="worker counts to measure (default 1,2)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of all the worker counts in turn (default 1)")
    parser.add_argument("--check-repeats", type=int, default=15, help="timings of each check, of which the median is shown (default 15)")
    parser.add_argument("--attempts", type=int, help="keep only this many attempts, those with the fewest experiments (a smoke run)")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    parser.add_argument("--live-seconds", type=int, default=2, help="ATTEMPT_LIVE_SECONDS of the streaming comparison (default 2)")
    parser.add_argument("--live-rounds", type=int, default=1, help="rounds of the streaming comparison, off and on in turn (default 1)")
    args = parser.parse_args()
    counts = [int(part) for part in args.workers.split(",") if part.strip()]

    from sandbox import backend_problem

    backend = os.environ.get("SANDBOX_BACKEND", "bubblewrap")
    problem = backend_problem(backend)
    if problem:
        raise SystemExit(f"sandbox {backend} unavailable: {problem}")

    with scratch_deployment("worker", backend=backend, redis_db=args.redis_db) as (env, scratch):
        import django

        django.setup()
        from django.core.management import call_command

        from runs.models import Suite

        call_command("migrate", verbosity=0)
        with open(os.devnull, "w") as quiet:
            call_command("import_suite", str(ROOT / "runs/suites/builtin"), "--samples", str(args.n), "--cap", str(args.cap), stdout=quiet)
        suite = Suite.objects.get(name="builtin")
        results = []
        for round_ in range(1, args.repeat + 1):
            # Every other round in reverse (1, 2, then 2, 1, ...), so that a machine speeding up or
            # slowing down over the minutes favours neither worker count.
            for count in counts if round_ % 2 else counts[::-1]:
                print(f"round {round_}: running with {count} worker(s)...", file=sys.stderr, flush=True)
                results.append({"round": round_, **bench(count, suite=suite, n=args.n, cap=args.cap, keep=args.attempts, env=env, logs=scratch)})
        report(results, n=args.n, backend=backend)
        print("running a noop run with 1 worker (failed attempts)...", file=sys.stderr, flush=True)
        failed = bench(1, suite=suite, n=args.n, cap=args.cap, keep=args.attempts, env=env, logs=scratch, agent="noop")
        report_held_out([a for r in results for a in r["attempts"] if a.passed], failed["attempts"])
        streaming: dict[str, list[dict]] = {"0": [], str(args.live_seconds): []}
        for round_ in range(1, args.live_rounds + 1):
            # Off then on, then on then off: a machine drifting over the minutes favours neither.
            order = list(streaming) if round_ % 2 else list(streaming)[::-1]
            for live in order:
                print(f"streaming round {round_}: ATTEMPT_LIVE_SECONDS={live}...", file=sys.stderr, flush=True)
                streaming[live].append({"round": round_, **bench(1, suite=suite, n=args.n, cap=args.cap, keep=args.attempts,
                                                                  env={**env, "ATTEMPT_LIVE_SECONDS": live}, logs=scratch)})
        report_streaming(streaming["0"], streaming[str(args.live_seconds)], live_seconds=args.live_seconds)
        report_check_costs(results[0]["attempts"], scratch=scratch, repeat=args.check_repeats)


if __name__ == "__main__":
    main()
