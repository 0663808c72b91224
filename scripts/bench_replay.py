#!/usr/bin/env python
"""Server time and memory of one replay request for the largest trajectory the limits allow.

Builds the worst trajectory runs.limits accepts and checks it with the upload validator
(`check_trajectory`, the function uploads go through): the most steps; the first page's steps
each at the step limit, with the most files and diff lines a step may hold and long text in every
text field (thought, observation, traceback, summary, notes) and a long Python file written; every other step a failed
command (exit code 1), so that the error scan finds one per step and reads every observation; as
much as the trajectory's byte limit allows. The attempt also gets the
largest final patch (bytes and lines) and the longest final answer an upload may carry. Then it
times requests through Django's test Client (in process: server time only, no network) for the
first page (the heaviest), a middle one, the last one, and the comparison page of two such
attempts (the first request of each apart: the first view of a trajectory also finds its error
steps, which are then cached), and measures each request's memory two ways:

- tracemalloc peak: Python allocations during the request (without the database driver's C
  buffers), in a separate pass because tracing slows Python down;
- RSS high-water delta: the process's peak resident memory during the first request of a page
  above its size before it (Linux: VmHWM, reset through /proc/self/clear_refs), which includes
  the driver's buffers; 0 when the request fit in memory the process already held.

Target (issue 11): under 300 ms and under 100 MB per request. A scratch Postgres database
(bench_replay_<pid>) is created, migrated and dropped at the end, whatever happens.

    .venv/bin/python scripts/bench_replay.py [--requests 20]

Postgres: BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432), a role that may create
databases. Takes about a minute.

    .venv/bin/python scripts/bench_replay.py --store-into postgres://.../autoexperiment_demo

stores the two attempts in that (migrated) database instead, keeps them and prints their replay
paths, measuring nothing: for scripts/bench_load.py against a running server (make demo).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import create_database, drop_database  # noqa: E402 - beside this script

SERVER = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432").rstrip("/")
DB_NAME = f"bench_replay_{os.getpid()}"
STORE_INTO = sys.argv[sys.argv.index("--store-into") + 1] if "--store-into" in sys.argv[:-1] else None
os.environ["DATABASE_URL"] = STORE_INTO or f"{SERVER}/{DB_NAME}"
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoexperiment_site.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

TARGET_MS = 300
TARGET_MB = 100


# --- the largest trajectory ----------------------------------------------------------------------


def filler(size: int, seed: str) -> str:
    """`size` ASCII characters of log-like lines (no characters JSON escapes but the newlines)."""
    line = f"{seed}: loss=0.123456 accuracy=0.9876 lr=0.0003 grad_norm=1.2345 step_time=0.456s\n"
    return (line * (size // len(line) + 1))[:size]


def diff(lines: int, path: str) -> str:
    return f"--- a/{path}\n+++ b/{path}\n@@ -1,{lines - 3} +1,{lines - 3} @@\n" + "".join(
        f"+    value_{i} = compute(x, {i})  # a changed line\n" if i % 2 else f"-    value_{i} = x\n"
        for i in range(lines - 3)
    )


def largest_trajectory(sample_id: str, limits, per_page: int) -> dict:
    from runs.agents.trajectory import FileChange, FinalAnswer, Header, Step, Trajectory
    from runs.limits import step_bytes

    header = Header(sample_id=sample_id, agent="react", model="openai:gpt-4o", config={"history": "full"},
                    started_at="2026-01-01T00:00:00+00:00", ended_at="2026-01-01T05:00:00+00:00", exit_status="submitted")
    trajectory = Trajectory(header=header)
    crash = ('Traceback (most recent call last):\n  File "run.py", line 3, in <module>\n    main()\n'
             "ValueError: shapes do not match\n[exit code 1; 0.4 s; cwd code]")
    for index in range(1, limits.steps + 1):
        trajectory.steps.append(Step(index=index, started_at="2026-01-01T00:00:00+00:00", duration=1.5, tool="command_line",
                                     arguments={"command": "python run.py"}, observation=crash, exit_code=1,
                                     input_tokens=1000, output_tokens=100, cost=0.001))
    # The first page: each step at the step limit, with the most files and diff lines it may hold
    # (while the attempt's diff lines last) in about half of it and text fields in the rest.
    files = min(limits.step_files, 250)
    lines_per_file = max(4, min(limits.step_diff_lines // files, (limits.step_bytes // 2) // (files * 48)))
    lines_left = limits.diff_lines
    fields = ("thought", "observation", "traceback", "summary")
    for step in trajectory.steps[:per_page]:
        while len(step.files_changed) < files and lines_left >= lines_per_file:
            name = f"code/module_{len(step.files_changed)}.py"
            step.files_changed.append(FileChange(name, "modified", diff(lines_per_file, name)))
            lines_left -= lines_per_file
        room = limits.step_bytes - step_bytes(step) - 512
        share = min(limits.text_bytes, room // (len(fields) + 2) * 64 // 66)  # "\n" is 2 bytes of JSON
        for name in fields:
            setattr(step, name, filler(share - len(crash), f"{name} {step.index}") + (crash if name == "observation" else ""))
        # A whole Python file written: the heaviest presentation of a call (numbered, highlighted lines).
        step.tool = "write_file"
        step.arguments = {"path": "code/module_0.py", "content": filler(share - 64, "arguments")}
        step.notes = [filler(share // 8 - 16, f"note {n}") for n in range(8)]
    trajectory.final_patch = diff(min(limits.patch_lines, limits.patch_bytes // 48), "code/final.py")
    trajectory.final_answer = FinalAnswer(raw="x", parsed={"Experiment 1": {"loss": 0.5}}, parse_method="json")
    # The other steps share what the trajectory's byte limit leaves, each one a failed command
    # without a traceback: the error scan then finds each one by its exit code.
    failed = "error: shapes do not match\n[exit code 1; 0.4 s; cwd code]"
    rest = trajectory.steps[per_page:]
    room = limits.trajectory_bytes - len(json.dumps(trajectory.to_dict())) - 64 * 1024
    extra = min(limits.text_bytes - len(failed), room // max(1, len(rest)) * 64 // 66) if rest else 0
    for step in rest:
        step.observation = filler(extra, f"output {step.index}") + failed
    return trajectory.to_dict()


def check_within_limits(data: dict, sample_id: str) -> None:
    from runs.submissions.validation import check_trajectory

    problems: list[str] = []
    if check_trajectory(data, sample_id, report=problems.append) is None or problems:
        raise SystemExit("the benchmark's trajectory is over the limits:\n" + "\n".join(problems))


def make_attempts(limits, per_page: int):
    from runs.benchmark.answers import MAX_ANSWER_CHARS
    from runs.benchmark.text import json_safe
    from runs.limits import DEFAULT_MAX_PATCH_BYTES
    from runs.models import Attempt, Experiment, Function, Paper, Run, Sample, Suite

    suite = Suite.objects.create(name=f"bench-{os.getpid()}", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="bench-paper", title="Bench")
    function = Function.objects.create(paper=paper, func_id=0, file="model.py", name="forward", description="d")
    experiment = Experiment.objects.create(paper=paper, exp_id=0, description="e", command="python run.py",
                                           answer_format={"loss": 0.0}, gold_result={"loss": 0.5})
    experiment.dependencies.set([function])
    sample = Sample.objects.create(paper=paper, sample_id="bench-paper_0", n=1)
    sample.functions.set([function])
    data = largest_trajectory(sample.sample_id, limits, per_page)
    check_within_limits(data, sample.sample_id)
    patch = diff(min(limits.patch_lines, min(limits.patch_bytes, DEFAULT_MAX_PATCH_BYTES) // 48), "code/final.py")
    attempts = []
    for index in range(2):
        run = Run.objects.create(suite=suite, agent="react", model="openai:gpt-4o", n_values=[1], sandbox_backend="bubblewrap")
        attempts.append(Attempt.objects.create(
            run=run, sample=sample, index=0, status=Attempt.DONE, exit_status="submitted", trajectory=json_safe(data),
            final_patch=patch, final_answer_raw="a" * MAX_ANSWER_CHARS, input_tokens=1, output_tokens=1, cost=0.1,
        ))
    return attempts, len(json.dumps(data)), len(data["steps"]), patch


# --- measuring -----------------------------------------------------------------------------------


def _hwm_kib() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _rss_kib() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure(client, url: str, requests: int) -> dict:
    gc.collect()
    rss_delta = None
    before = _rss_kib() if _reset_hwm() else None
    started = time.perf_counter()
    response = client.get(url)
    first = time.perf_counter() - started
    after = _hwm_kib()
    if before is not None and after is not None:
        rss_delta = max(0, after - before) * 1024
    if response.status_code != 200:
        raise SystemExit(f"GET {url} answered {response.status_code}")
    times = []
    for _ in range(requests):
        gc.collect()
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
    gc.collect()
    tracemalloc.start()
    client.get(url)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    html = response.content.decode()
    return {
        "first": first, "median": statistics.median(times), "max": max(times), "traced": traced_peak, "rss": rss_delta,
        "kib": len(response.content) / 1024, "steps": html.count('<li class="step'),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="timed requests per page, after a first one")
    parser.add_argument("--store-into", metavar="DATABASE_URL", help="keep the attempts in this migrated database; measure nothing")
    options = parser.parse_args()
    if options.store_into:
        store_into()
        return

    create_database(f"{SERVER}/postgres", DB_NAME)
    try:
        import django

        django.setup()
        from django.conf import settings

        # The error steps are cached as on the site, in this process's memory rather than the
        # shared Redis, so that a benchmark leaves nothing behind (a Redis GET is a fraction of a ms).
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
        from django.core.management import call_command
        from django.test import Client
        from django.urls import reverse

        from runs.limits import replay_bounds, trajectory_limits

        call_command("migrate", verbosity=0)
        limits, bounds = trajectory_limits(), replay_bounds()
        clock = time.perf_counter()
        (attempt, other), size, steps, patch = make_attempts(limits, bounds.steps_per_page)
        print(f"limits: {limits.steps:,} steps, {limits.text_bytes:,} bytes per text field and {limits.step_bytes:,} per step, "
              f"{limits.step_files} files and "
              f"{limits.step_diff_lines:,} diff lines per step, {limits.diff_lines:,} diff lines per trajectory, "
              f"{limits.trajectory_bytes:,} bytes per trajectory, final patch {limits.patch_bytes:,} bytes / "
              f"{limits.patch_lines:,} lines; {bounds.steps_per_page} steps to a page")
        print(f"stored: a trajectory of {steps:,} steps, {size:,} bytes of JSON (accepted by the upload validator), "
              f"a final patch of {len(patch):,} bytes / {patch.count(chr(10)):,} lines, an answer of 1,000,000 characters; "
              f"two such attempts, in {time.perf_counter() - clock:.1f} s")

        client = Client(HTTP_HOST="localhost")
        client.get(reverse("replay:attempt", args=[other.pk]) + "?page=2")  # templates compiled, connections open
        base = reverse("replay:attempt", args=[attempt.pk])
        last_page = -(-steps // bounds.steps_per_page)
        pages = [
            ("attempt, page 1 (heaviest)", base),
            (f"attempt, page {last_page // 2}", f"{base}?page={last_page // 2}"),
            (f"attempt, page {last_page} (last)", f"{base}?page={last_page}"),
            ("compare two, page 1", f"{reverse('replay:compare')}?a={attempt.pk}&b={other.pk}"),
        ]
        print(f"\n{'request':<30}{'first':>9}{'median':>9}{'max':>9}{'traced peak':>13}{'RSS peak +':>12}{'KiB':>8}"
              f"{'steps':>7}   ({options.requests} requests after a first one)")
        worst_ms = worst_mb = 0.0
        for name, url in pages:
            figures = measure(client, url, options.requests)
            rss = f"{figures['rss'] / 2**20:.1f} MB" if figures["rss"] is not None else "n/a"
            print(f"{name:<30}{figures['first'] * 1000:>7.0f}ms{figures['median'] * 1000:>7.0f}ms{figures['max'] * 1000:>7.0f}ms"
                  f"{figures['traced'] / 2**20:>10.1f} MB{rss:>12}{figures['kib']:>8.0f}{figures['steps']:>7}")
            if name.startswith("attempt"):
                worst_ms = max(worst_ms, figures["median"] * 1000, figures["first"] * 1000)
                worst_mb = max(worst_mb, figures["traced"] / 2**20, (figures["rss"] or 0) / 2**20)
        verdict = "met" if worst_ms < TARGET_MS and worst_mb < TARGET_MB else "NOT met"
        print("first: the first request, which also finds the error steps (then cached for that version of the row);\n"
              "traced peak: tracemalloc, of a later request; RSS peak +: the process's resident high-water mark during\n"
              "the first request above its resident size before it (0: it fit in memory the process already held)")
        print(f"\nreplay request, worst page: {worst_ms:.0f} ms (first or median), peak {worst_mb:.1f} MB "
              f"(target < {TARGET_MS} ms and < {TARGET_MB} MB: {verdict})")
    finally:
        drop_database(f"{SERVER}/postgres", DB_NAME)
        print(f"database {DB_NAME} dropped")


def store_into() -> None:
    import django

    django.setup()
    from runs.limits import replay_bounds, trajectory_limits

    (attempt, other), size, steps, _ = make_attempts(trajectory_limits(), replay_bounds().steps_per_page)
    print(f"stored two attempts of {steps:,} steps ({size:,} bytes of JSON each) in {STORE_INTO}:")
    print(f"/attempts/{attempt.pk}/ /attempts/{other.pk}/ /attempts/compare/?a={attempt.pk}&b={other.pk}")


if __name__ == "__main__":
    main()
