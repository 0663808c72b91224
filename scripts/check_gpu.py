#!/usr/bin/env python3
"""Run the PyTorch papers' gold experiments on a GPU inside the bubblewrap sandbox and compare every
number with the stored CPU gold.

For a bare GPU machine: an NVIDIA driver, bubblewrap, and a Python with torch; no Postgres, no Redis,
no Django, no network. It reads the suite folder as it is in the repository (paper.json, gold.json,
the gold code, the data files, checked against their sha256), builds each paper's workspace from
its gold code, binds this Python's environment (the venv or conda prefix it runs from, or --python's)
read-only into the sandbox as the papers' environment, and runs every experiment twice in fresh
sandboxes: without a GPU (the CPU) and with one. It prints, per experiment, the largest relative
drift of the GPU's numbers from the CPU gold, the time on the GPU against the CPU, and a verdict.

On a machine without a GPU (no /dev/nvidia*, or torch in the sandbox sees none) it says so, still
checks that this Python reproduces the CPU gold, and exits 0 (`--require-gpu`: exits 2).

    python3 scripts/check_gpu.py                       # the built-in PyTorch suite
    python3 scripts/check_gpu.py --experiments 1       # the first experiment of each paper only
    SANDBOX_CGROUP_PARENT=/autoexperiment python3 scripts/check_gpu.py   # a real memory cgroup (cgroup v2 hosts)

Exit status: 0 every compared number within its experiment's tolerance (or no GPU), 1 a drift past
tolerance or an experiment that failed, 2 no GPU with --require-gpu, 3 the set-up failed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))

from runs.benchmark.datafiles import file_sha256, is_url  # noqa: E402 - after the path: no Django in these
from runs.benchmark.execution import run_experiment  # noqa: E402
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, score_experiment  # noqa: E402
from runs.benchmark.workspace import CODE_DIR, ExperimentSpec  # noqa: E402
from sandbox import Limits, SandboxError, backend_problem, open_sandbox  # noqa: E402

DEFAULT_SUITE = REPOSITORY / "runs" / "suites" / "builtin-pytorch"
# CUDA's libraries and a model's tensors need more than the attempts' default; the GPU's own memory is not counted.
LIMITS = Limits(memory_mb=16384, pids=512, cpus=4.0, disk_mb=4096)
PROBE = (
    "import json, torch; available = torch.cuda.is_available(); "
    "x = torch.ones(1024, 1024, device='cuda') @ torch.ones(1024, 1024, device='cuda') if available else None; "
    "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'available': available, "
    "'device': torch.cuda.get_device_name(0) if available else None, 'count': torch.cuda.device_count(), "
    "'allocated': float(x[0, 0]) if available else None}))"
)


class SetupError(Exception):
    """The check cannot start: the suite, the Python or the sandbox is not usable (the message says why)."""


@dataclass
class Paper:
    paper_id: str
    directory: Path
    experiments: list[ExperimentSpec]
    gold: dict
    tolerances: dict[int, tuple[float, float]]
    data: dict[str, Path]


def read_papers(suite: Path, *, limit: int | None) -> list[Paper]:
    """The suite's papers as its folder holds them (their data files checked against their hashes)."""
    try:
        listed = json.loads((suite / "suite.json").read_text())["papers"]
    except (OSError, ValueError, KeyError) as error:
        raise SetupError(f"{suite}/suite.json cannot be read: {error}") from None
    papers = []
    for name in listed:
        directory = suite / name
        try:
            declared = json.loads((directory / "paper.json").read_text())
            gold = json.loads((directory / "gold.json").read_text())["results"]
        except (OSError, ValueError, KeyError) as error:
            raise SetupError(f"paper {name}: paper.json or gold.json cannot be read: {error}") from None
        data = {}
        for entry in declared.get("data", []):
            path = directory / entry["source"]
            if is_url(entry["source"]):
                raise SetupError(f"paper {name}: data file {entry['name']} is remote ({entry['source']}); this check reads local files only")
            if not path.is_file() or file_sha256(path) != entry["sha256"]:
                raise SetupError(f"paper {name}: data file {path} is missing or does not match its sha256 {entry['sha256']}")
            data[entry["name"]] = path
        experiments = [
            ExperimentSpec(exp_id=item["id"], description=item["description"], command=item["command"],
                           answer_format=item["answer_format"], timeout_seconds=item.get("timeout", 600))
            for item in declared["experiments"]
        ][:limit]
        tolerances = {
            item["id"]: (item.get("rtol") if item.get("rtol") is not None else DEFAULT_RTOL,
                         item.get("atol") if item.get("atol") is not None else DEFAULT_ATOL)
            for item in declared["experiments"]
        }
        papers.append(Paper(name, directory, experiments, gold, tolerances, data))
    return papers


def environment_prefix(python: str) -> Path | None:
    """The environment `python` belongs to (a venv's or conda's prefix): bound into the sandbox."""
    candidate = Path(python)
    if not candidate.is_absolute():
        candidate = Path(shutil.which(python) or python)
    prefix = candidate.parent.parent  # <prefix>/bin/python3, without resolving a venv's symlink to its base
    if not (prefix / "bin").is_dir():
        raise SetupError(f"{python} is not in an environment's bin/ directory")
    if prefix.resolve() == Path("/usr"):
        return None  # the system's Python: the sandbox has /usr already
    return prefix


def _open(workspace: Path, *, environment: Path | None, data: dict[str, Path], gpus: str | None, name: str):
    return open_sandbox("bubblewrap", workspace, limits=LIMITS, environment=environment, data=data, gpus=gpus, name=name)


def probe_gpu(scratch: Path, environment: Path | None) -> tuple[dict | None, str]:
    """What torch sees inside a sandbox given the GPUs (None, and why, when there is no GPU)."""
    if not list(Path("/dev").glob("nvidia[0-9]*")):
        return None, "no /dev/nvidia* device: this machine has no NVIDIA GPU (or its driver is not loaded)"
    workspace = scratch / "probe"
    workspace.mkdir()
    with _open(workspace, environment=environment, data={}, gpus="all", name="check-gpu-probe") as box:
        result = box.execute(f'python3 -c "{PROBE}"', timeout=300)
        memory = box.memory_enforcement
    try:
        seen = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f"torch could not be run in the sandbox (exit {result.exit_code}): {result.output.strip()[-2000:]}"
    seen["memory_enforcement"] = memory
    if not seen["available"]:
        return None, f"torch {seen['torch']} (CUDA {seen['cuda']}) sees no GPU inside the sandbox"
    return seen, ""


def run_paper(paper: Paper, scratch: Path, *, environment: Path | None, gpus: str | None) -> dict[int, object]:
    """Each experiment's outcome in one fresh sandbox on the paper's gold code."""
    workspace = scratch / f"{paper.paper_id}-{'gpu' if gpus else 'cpu'}"
    shutil.copytree(paper.directory / "code", workspace / CODE_DIR)
    with _open(workspace, environment=environment, data=paper.data, gpus=gpus,
               name=f"check-gpu-{paper.paper_id}-{'gpu' if gpus else 'cpu'}") as box:
        return {experiment.exp_id: run_experiment(box, experiment) for experiment in paper.experiments}


def compare(paper: Paper, experiment: ExperimentSpec, outcome) -> tuple[bool, float | None, str]:
    """(within tolerance, the largest relative drift from gold, what went wrong)."""
    if outcome.error:
        return False, None, outcome.error
    rtol, atol = paper.tolerances[experiment.exp_id]
    score = score_experiment(gold=paper.gold[str(experiment.exp_id)], predicted=outcome.result, rtol=rtol, atol=atol)
    drifts = [number.relative_error for number in score.numbers if number.relative_error is not None]
    worst = max(drifts) if drifts else None
    failed = [f"{number.key}: {number.reason}" for number in score.numbers if not number.passed]
    return score.passed, worst, "; ".join(failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE, help="the suite folder (default: the built-in PyTorch suite)")
    parser.add_argument("--python", default=sys.executable, help="a Python with torch whose environment the sandbox binds")
    parser.add_argument("--experiments", type=int, default=None, help="run only the first N experiments of each paper")
    parser.add_argument("--require-gpu", action="store_true", help="exit 2 when there is no GPU")
    args = parser.parse_args(argv)

    try:
        problem = backend_problem("bubblewrap")
        if problem:
            raise SetupError(f"the bubblewrap sandbox cannot run here: {problem}")
        papers = read_papers(args.suite, limit=args.experiments)
        environment = environment_prefix(args.python)
        scratch = Path(tempfile.mkdtemp(prefix="check-gpu-"))
        os.chmod(scratch, 0o755)
    except (SetupError, SandboxError) as error:
        print(f"check_gpu: cannot start: {error}")
        return 3
    try:
        print(f"check_gpu: suite {args.suite}, python {args.python} (environment bound: {environment or '/usr'}), bubblewrap")
        try:
            gpu, why_not = probe_gpu(scratch, environment)
        except SandboxError as error:
            print(f"check_gpu: the GPU sandbox could not be opened: {error}")
            return 3
        if gpu:
            print(f"GPU: {gpu['device']} ({gpu['count']} visible), torch {gpu['torch']}, CUDA {gpu['cuda']}; "
                  f"a CUDA allocation and matmul inside the sandbox worked; memory held by {gpu['memory_enforcement']}")
        else:
            print(f"NO GPU: {why_not}. Checking only that this Python reproduces the CPU gold.")
        compared = failures = 0
        for paper in papers:
            print(f"paper {paper.paper_id} ({len(paper.experiments)} experiments)")
            cpu = run_paper(paper, scratch, environment=environment, gpus=None)
            on_gpu = run_paper(paper, scratch, environment=environment, gpus="all") if gpu else {}
            for experiment in paper.experiments:
                cpu_ok, cpu_drift, cpu_problem = compare(paper, experiment, cpu[experiment.exp_id])
                line = f"  exp {experiment.exp_id}: cpu {cpu[experiment.exp_id].duration:6.2f} s, drift from gold " + (
                    f"{cpu_drift:.1e}" if cpu_drift is not None else "-")
                ok = cpu_ok
                problem = cpu_problem and f"cpu: {cpu_problem}"
                if gpu:
                    gpu_ok, gpu_drift, gpu_problem = compare(paper, experiment, on_gpu[experiment.exp_id])
                    ratio = on_gpu[experiment.exp_id].duration / max(cpu[experiment.exp_id].duration, 1e-9)
                    line += (f" | gpu {on_gpu[experiment.exp_id].duration:6.2f} s ({ratio:.2f}x the cpu), drift from gold "
                             + (f"{gpu_drift:.1e}" if gpu_drift is not None else "-"))
                    ok = ok and gpu_ok
                    problem = "; ".join(filter(None, [problem, gpu_problem and f"gpu: {gpu_problem}"]))
                rtol, _ = paper.tolerances[experiment.exp_id]
                print(f"{line} (rtol {rtol:g}): {'ok' if ok else 'FAIL ' + problem[:500]}")
                compared += 1
                failures += not ok
        where = "on the GPU and the CPU" if gpu else "on the CPU (no GPU)"
        verdict = "PASS" if not failures else "FAIL"
        print(f"verdict: {verdict}: {compared - failures}/{compared} experiments within tolerance of the CPU gold {where}")
        if failures:
            return 1
        if not gpu and args.require_gpu:
            return 2
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
