#!/usr/bin/env python3
"""What a paper's environment costs: building it cold (a fresh root: venv, pip install, byte code)
and warm (built already: the no-op every `build_environment` after the first is), then the median
time of importing its package with the environment's python3 run directly and in an open sandbox of
each backend with the environment bound (the sandbox's own cost of a command is bench_sandbox's).

    .venv/bin/python scripts/bench_environment.py [--requirement six==1.17.0] [--module six] [--runs 5]
    .venv/bin/python scripts/bench_environment.py --requirement torch==2.13.0 --module torch   # minutes cold

The default package is on this machine's local index, so it needs no network.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import BACKENDS, backend_problem, open_sandbox
from sandbox.environments import Declaration, environment_build


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requirement", action="append", default=None, help="name==version (repeatable)")
    parser.add_argument("--module", default=None, help="the module to import (default: the first requirement's name)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backend", action="append", choices=BACKENDS, default=None)
    arguments = parser.parse_args()
    requirements = tuple(arguments.requirement or ["six==1.17.0"])
    module = arguments.module or requirements[0].split("==")[0].split("[")[0].replace("-", "_")
    declaration = Declaration.from_json({"requirements": list(requirements)})

    root = Path(tempfile.mkdtemp(prefix="bench-environment-"))
    os.chmod(root, 0o755)  # the sandbox uid reaches the environment through it
    try:
        cold = timed(lambda: environment_build(root, declaration))
        path, _ = environment_build(root, declaration)
        warm = timed(lambda: environment_build(root, declaration))
        print(f"environment of {' '.join(requirements)}: cold build {cold:.1f} s, warm (already built) {warm * 1000:.1f} ms")

        command = f"python3 -c 'import {module}'"
        bare = statistics.median(
            timed(lambda: subprocess.run([path / "bin" / "python3", "-c", f"import {module}"], check=True))
            for _ in range(arguments.runs)
        )
        columns = [f"bare {bare * 1000:.0f} ms"]
        for backend in arguments.backend or BACKENDS:
            problem = backend_problem(backend)
            if problem:
                columns.append(f"{backend} unavailable")
                print(f"{backend}: {problem}", file=sys.stderr)
                continue
            with tempfile.TemporaryDirectory(prefix="bench-environment-workspace-") as workspace:
                with open_sandbox(backend, workspace, environment=path) as sandbox:
                    sandbox.execute(command, timeout=600)  # warm-up: the page cache, the container
                    seconds = statistics.median(
                        timed(lambda: _ok(sandbox.execute(command, timeout=600))) for _ in range(arguments.runs)
                    )
            columns.append(f"{backend} {seconds * 1000:.0f} ms")
        print(f"import {module}: " + "   ".join(columns))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _ok(result) -> None:
    if not result.ok:
        raise SystemExit(f"the import failed in the sandbox: {result.output}")


if __name__ == "__main__":
    main()
