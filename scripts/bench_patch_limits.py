#!/usr/bin/env python3
"""What an agent's oversized final patch costs a worker: one ReAct attempt on the built-in suite
whose model (the tests' fake LLM on loopback) writes 120 files of 500 KB into the code, then answers.

    .venv/bin/python scripts/bench_patch_limits.py [--files 120] [--file-kb 500] [--redis-db 12]

The attempt runs as an RQ work horse runs it: in a process forked from one with Django set up
(runs.evaluation.worker forks a work horse per job), calling the harness (attempt_execute). Prints
the work horse's peak resident memory (its own maximum, os.wait4's ru_maxrss, next to what it
inherited at the fork), the stored final patch and trajectory sizes, the attempt's outcome and
wall time. Since issue 30 the final patch is held to SUBMISSION_MAX_PATCH_BYTES / _LINES
(docs/configuration.md): diffed file by file, stopped at the first file over them, stored cut, the attempt
failed with outcome patch_too_large and not re-executed. Run on an older commit it shows what that
bound saves. Measured on two cores, bubblewrap (the commit before the bound / after):

    120 files of 500 KB   work horse peak 1,207 MB / 381 MB   stored patch 57.8 MB / 0.96 MB   attempt 38.7 s / 1.6 s
    240 files of 500 KB                    -      / 407 MB                      -  / 0.96 MB

What remains grows no further with the files written: the workspace snapshots the recorder diffs
steps with hold at most MAX_SNAPSHOT_BYTES of text each (runs.agents.recorder), a step diffs only
the files its budget can keep, and the final patch stops at its limit.

Uses a scratch Postgres database, Redis database 12 (or --redis-db; flushed) and the sandbox of $SANDBOX_BACKEND
(bubblewrap by default), like scripts/bench_worker.py; about a minute on two cores.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import scratch_deployment  # noqa: E402 - beside this script

REDIS_DB = 12
SAMPLE = "temperature-scaling_4"  # n = 1, experiments of well under a second


def _writer(files: int, file_bytes: int) -> str:
    """The shell command the model sends: `files` Python files of `file_bytes` each under code/bulk/."""
    return f"""python3 - <<'EOF'
import os
os.makedirs("code/bulk", exist_ok=True)
line = "x = 1  # " + "y" * 90 + "\\n"
for number in range({files}):
    with open(f"code/bulk/part_{{number:03d}}.py", "w") as handle:
        handle.write(line * ({file_bytes} // len(line)))
print("wrote", len(os.listdir("code/bulk")))
EOF"""


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=120)
    parser.add_argument("--file-kb", type=int, default=500)
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    args = parser.parse_args()

    from sandbox import backend_problem

    backend = os.environ.get("SANDBOX_BACKEND", "bubblewrap")
    if problem := backend_problem(backend):
        raise SystemExit(f"sandbox {backend} unavailable: {problem}")

    with scratch_deployment("patch_limits", backend=backend, redis_db=args.redis_db):
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        from runs.evaluation.harness import attempt_execute
        from runs.evaluation.services import run_create
        from runs.limits import human_bytes, trajectory_limits
        from runs.models import Attempt, Suite
        from tests.fakes import FakeLLMServer, FakeTurn

        call_command("migrate", verbosity=0)
        with open(os.devnull, "w") as quiet:
            call_command("import_suite", str(ROOT / "runs/suites/builtin"), "--samples", "1", stdout=quiet)
        with FakeLLMServer() as llm:
            run = run_create(suite=Suite.objects.get(name="builtin"), agent="react", n_values=[1], enqueue=False,
                             model=f"openai-compatible:gpt-4o@{llm.base_url_openai}")
            attempt = run.attempts.get(sample__sample_id=SAMPLE)
            llm.script([
                FakeTurn(text="Write a lot of code.", tool_calls=[("command_line", {
                    "command": _writer(args.files, args.file_kb * 1000), "timeout": 300})]),
                FakeTurn(text="Submit.", tool_calls=[("final_answer", {"answer": {"Experiment 1": {"ece": 0.1}}})]),
            ])
            connections.close_all()  # as the worker does before it forks: the work horse opens its own
            inherited = _rss_kb()
            started = time.monotonic()
            pid = os.fork()
            if pid == 0:  # the work horse
                status = 1
                try:
                    status = 0 if attempt_execute(attempt_id=attempt.pk, job_id="bench", requeue=False) else 1
                finally:
                    os._exit(status)
            _, status, usage = os.wait4(pid, 0)
            wall = time.monotonic() - started
        if status:
            raise SystemExit(f"the work horse exited with status {status}")
        attempt = Attempt.objects.get(pk=attempt.pk)
        limits = trajectory_limits()
        patch_bytes = len(attempt.final_patch.encode("utf-8"))
        trajectory_bytes = len(json.dumps(attempt.trajectory, ensure_ascii=False).encode("utf-8"))
        print(f"react attempt writing {args.files} files of {args.file_kb} KB into code/ ({args.files * args.file_kb / 1000:.0f} MB), "
              f"sandbox {backend}; final patch limits {human_bytes(limits.patch_bytes)}, {limits.patch_lines:,} lines")
        print(f"  work horse peak RSS     {usage.ru_maxrss / 1024:8.0f} MB  (inherited at the fork: {inherited / 1024:.0f} MB)")
        print(f"  stored final patch      {patch_bytes / 2**20:8.2f} MB  ({attempt.final_patch.count(chr(10)):,} lines)")
        print(f"  stored trajectory       {trajectory_bytes / 2**20:8.2f} MB  (as JSON)")
        print(f"  attempt                 {wall:8.1f} s   status {attempt.status}, outcome {attempt.outcome or '-'}, "
              f"harness verdict {attempt.reexecution_passed}, re-execution {attempt.reexecution_seconds or 0:.1f} s")
        if attempt.reexecution_error:
            print(f"  {attempt.reexecution_error[:300]}")


if __name__ == "__main__":
    main()
