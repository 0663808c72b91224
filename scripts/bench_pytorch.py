#!/usr/bin/env python3
"""What the sandbox costs a PyTorch experiment: the built-in PyTorch papers' experiments run bare (the
environment's python3 in a copy of the gold code) and in an open sandbox of each backend (the same
environment and data bound), interleaved, median of --runs each; and what their environment costs to
build, cold (a fresh root, `--cold`: a minute or more) and warm (built already).

    .venv/bin/python scripts/bench_pytorch.py [--runs 5] [--experiments 2] [--paper ID] [--backend bubblewrap] [--cold]

Targets (issue 32): the sandbox adds at most 5% (bubblewrap) and 10% (Docker) to an experiment's time.
No Django: the environment is built under --environments-root (the project's default, var/environments,
so a later `manage.py build_environment` finds it built).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from sandbox import BACKENDS, Limits, backend_problem, open_sandbox  # noqa: E402
from sandbox.environments import Declaration, environment_build  # noqa: E402

SUITE = REPOSITORY / "runs" / "suites" / "builtin-pytorch"
TARGETS = {"bubblewrap": 5.0, "docker": 10.0}
# Two CPUs: the sandbox's CPU quota must not be what is measured (the papers' code uses one thread).
LIMITS = Limits(memory_mb=4096, cpus=2.0)


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _papers() -> list[str]:
    return json.loads((SUITE / "suite.json").read_text())["papers"]


def _experiments(limit: int, papers: list[str]) -> list[tuple[str, Path, dict, dict]]:
    """(paper id, its directory, its data files by name, the experiment) of each paper's first `limit`."""
    chosen = []
    for name in papers:
        paper = json.loads((SUITE / name / "paper.json").read_text())
        data = {entry["name"]: SUITE / name / entry["source"] for entry in paper.get("data", [])}
        chosen += [(name, SUITE / name, data, experiment) for experiment in paper["experiments"][:limit]]
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--experiments", type=int, default=2, help="experiments of each paper")
    parser.add_argument("--paper", action="append", choices=_papers(), default=None, help="only this paper (repeatable)")
    parser.add_argument("--warm-up-rounds", type=int, default=1,
                        help="untimed rounds before the timed ones (0 in the test suite's smoke run)")
    parser.add_argument("--backend", action="append", choices=BACKENDS, default=None)
    parser.add_argument("--cold", action="store_true", help="also build the environment in a fresh root")
    parser.add_argument("--environments-root", type=Path, default=REPOSITORY / "var" / "environments")
    arguments = parser.parse_args()
    backends = [backend for backend in arguments.backend or list(BACKENDS) if not backend_problem(backend)]
    declaration = Declaration.from_json(json.loads((SUITE / "suite.json").read_text())["environment"])

    if arguments.cold:
        fresh = Path(tempfile.mkdtemp(prefix="bench-pytorch-env-"))
        os.chmod(fresh, 0o755)
        try:
            print(f"environment cold build: {timed(lambda: environment_build(fresh, declaration)):.1f} s")
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    first = timed(lambda: environment_build(arguments.environments_root, declaration))
    environment, _ = environment_build(arguments.environments_root, declaration)
    warm = timed(lambda: environment_build(arguments.environments_root, declaration))
    print(f"environment of {' '.join(declaration.requirements)}: first call {first:.1f} s, warm (already built) {warm * 1000:.1f} ms")

    scratch = Path(tempfile.mkdtemp(prefix="bench-pytorch-"))
    os.chmod(scratch, 0o755)
    totals = {"bare": 0.0, **dict.fromkeys(backends, 0.0)}
    try:
        for paper_id, directory, data, experiment in _experiments(arguments.experiments, arguments.paper or _papers()):
            code = scratch / f"{paper_id}-bare"
            if not code.exists():
                shutil.copytree(directory / "code", code)
                data_dir = scratch / f"{paper_id}-data"
                data_dir.mkdir()
                for name, path in data.items():
                    shutil.copyfile(path, data_dir / name)
            bare_env = {**os.environ, "PATH": f"{environment}/bin:/usr/bin:/bin", "PAPER_DATA_DIR": str(scratch / f"{paper_id}-data"),
                        "PYTHONDONTWRITEBYTECODE": "1"}
            sandboxes = {}
            for backend in backends:
                workspace = scratch / f"{paper_id}-{experiment['id']}-{backend}"
                shutil.copytree(directory / "code", workspace / "code")
                sandboxes[backend] = open_sandbox(backend, workspace, limits=LIMITS, environment=environment, data=data,
                                                  name=f"bench-pytorch-{backend}")
            times: dict[str, list[float]] = {"bare": [], **{backend: [] for backend in backends}}
            try:
                # Untimed rounds first (the page cache, the environment's byte code), then the timed
                # rounds, interleaved: a slow moment of the machine hits every variant alike.
                for round_number in range(arguments.warm_up_rounds + arguments.runs):
                    timed_round = round_number >= arguments.warm_up_rounds
                    bare = timed(lambda: subprocess.run(
                        experiment["command"], shell=True, cwd=code, env=bare_env, check=True, capture_output=True))
                    if timed_round:
                        times["bare"].append(bare)
                    for backend, box in sandboxes.items():
                        result = box.execute(experiment["command"], timeout=600, cwd="code")
                        if result.exit_code != 0:
                            raise SystemExit(f"{paper_id} experiment {experiment['id']} failed in {backend}: {result.output[-2000:]}")
                        if timed_round:
                            times[backend].append(result.duration)
            finally:
                for box in sandboxes.values():
                    box.close()
            medians = {variant: statistics.median(values) for variant, values in times.items()}
            for variant, value in medians.items():
                totals[variant] += value
            cells = "   ".join(
                f"{variant} {value:.2f} s" + ("" if variant == "bare" else f" ({(value / medians['bare'] - 1) * 100:+.1f}%)")
                for variant, value in medians.items()
            )
            print(f"{paper_id} experiment {experiment['id']}: {cells}")
        for backend in backends:
            overhead = (totals[backend] / totals["bare"] - 1) * 100
            verdict = "met" if overhead <= TARGETS[backend] else "NOT met"
            print(f"pytorch experiments in {backend}: {overhead:+.1f}% against bare (target at most {TARGETS[backend]:.0f}%: {verdict})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
