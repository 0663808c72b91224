#!/usr/bin/env python3
"""What a sandbox costs: median time to open one, run `python3 -c pass` and close it, per backend,
next to the same command run directly. Also the command alone in an already open sandbox, which is
what each step of an agent pays. For Docker, the engine's storage driver, which sets most of the
cost of opening (vfs copies the whole image per container, overlay2 does not).

    .venv/bin/python scripts/bench_sandbox.py [--runs 10] [--backend docker ...]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker

from sandbox import BACKENDS, backend_problem, open_sandbox

COMMAND = "python3 -c pass"


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run_in_sandbox(sandbox) -> None:
    result = sandbox.execute(COMMAND, timeout=60)
    if not result.ok:
        raise SystemExit(f"{COMMAND!r} failed in {sandbox.backend}: {result.output}")


def bench_backend(backend: str, runs: int, workspace: Path) -> tuple[float, float]:
    def open_run_close() -> None:
        with open_sandbox(backend, workspace, name="") as sandbox:
            run_in_sandbox(sandbox)

    cold = statistics.median(timed(open_run_close) for _ in range(runs))
    with open_sandbox(backend, workspace) as sandbox:
        run_in_sandbox(sandbox)  # warm-up
        warm = statistics.median(timed(lambda: run_in_sandbox(sandbox)) for _ in range(runs))
    return cold, warm


def docker_storage_driver() -> str:
    client = docker.from_env()
    try:
        return client.info().get("Driver") or "unknown"
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="default: all available")
    options = parser.parse_args()

    # The host's Debian python3, the interpreter the bubblewrap backend runs.
    direct = statistics.median(
        timed(lambda: subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)) for _ in range(options.runs)
    )
    print(f"median of {options.runs} runs of `{COMMAND}`")
    print(f"{'backend':<12} {'open+run+close':>15} {'run (open sandbox)':>19} {'direct':>9}  notes")
    for backend in options.backend or BACKENDS:
        problem = backend_problem(backend)
        if problem:
            print(f"{backend:<12} unavailable: {problem}")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as workspace:
            cold, warm = bench_backend(backend, options.runs, Path(workspace))
        notes = f"storage driver {docker_storage_driver()}" if backend == "docker" else ""
        print(f"{backend:<12} {cold * 1000:>13.0f}ms {warm * 1000:>17.0f}ms {direct * 1000:>7.0f}ms  {notes}".rstrip())


if __name__ == "__main__":
    main()
