"""Fixtures for the evaluation tests: an isolated Redis database, the built-in suite in the test
database, and real RQ workers as subprocesses that see the test database.

Tests that start workers must be transactional (`django_db(transaction=True)`): a worker is
another process and only sees committed rows.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

import tests.evaluation.agents  # noqa: F401 - registers the test agents in this process too
from runs.models import Attempt
from tests.evaluation.helpers import claimed_pid
from tests.support import import_builtin_suite, redis_test_url, require_backend, shared_database_url

BASE_DIR = Path(__file__).resolve().parents[2]
WORKER_CLASS = "tests.evaluation.agents.WorkerWithTestAgents"


@pytest.fixture(autouse=True)
def no_retry_backoff(settings):
    """Infrastructure retries at once, in this process and (see Workers.env) in the workers: the
    tests about back-off turn it on themselves."""
    settings.ATTEMPT_RETRY_BACKOFF_SECONDS = 0


@pytest.fixture(autouse=True)
def own_workspace_root(workspace_root) -> Path:
    """Every test here runs its attempts under its own tmp_path (tests/conftest.py)."""
    return workspace_root


@pytest.fixture
def builtin_suite(db):
    """The built-in suite (4 papers, 28 functions) with its 28 n=1 samples, and the bubblewrap
    sandbox its attempts run in; runs draw others."""
    require_backend("bubblewrap")
    return import_builtin_suite()


class Workers:
    """Starts `manage.py evaluation_worker` subprocesses against the test database and Redis database 15."""

    def __init__(self, tmp_path: Path, workspace_root: Path) -> None:
        self.tmp_path = tmp_path
        self.workspace_root = workspace_root
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            **os.environ,
            "DEBUG": "1",
            "DATABASE_URL": shared_database_url(),
            "REDIS_URL": redis_test_url(),
            "WORKSPACE_ROOT": str(self.workspace_root),
            "SANDBOX_BACKEND": "bubblewrap",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "ATTEMPT_RETRY_BACKOFF_SECONDS": "0",  # see no_retry_backoff
        }
        env.update(extra)
        return env

    def start(self, *, burst: bool = True, **env: str) -> subprocess.Popen:
        log = self.tmp_path / f"worker-{len(self.processes)}.log"
        command = [sys.executable, "manage.py", "evaluation_worker", "--skip-checks", "--worker-class", WORKER_CLASS]
        if burst:
            command.insert(3, "--burst")
        with open(log, "w") as handle:
            process = subprocess.Popen(command, cwd=BASE_DIR, env=self.env(**env), stdout=handle, stderr=subprocess.STDOUT)
        self.processes.append((process, log))
        return process

    def start_supervised(self, **env: str) -> subprocess.Popen:
        """A long-running worker under the Procfile's supervisor (manage.py supervised_worker), which
        starts it again whenever it dies; the Popen is the supervisor's."""
        log = self.tmp_path / f"worker-{len(self.processes)}.log"
        command = [sys.executable, "manage.py", "supervised_worker", "--skip-checks", "--worker-class", WORKER_CLASS]
        with open(log, "w") as handle:
            process = subprocess.Popen(command, cwd=BASE_DIR, env=self.env(**env), stdout=handle, stderr=subprocess.STDOUT)
        self.processes.append((process, log))
        return process

    def run(self, count: int = 1, *, timeout: float = 180, **env: str) -> None:
        """Start `count` burst workers and wait until all of them have emptied the queue and quit."""
        started = [self.start(**env) for _ in range(count)]
        for process in started:
            self.wait(process, timeout=timeout)

    def wait(self, process: subprocess.Popen, *, timeout: float = 180) -> int:
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"worker {process.pid} did not finish in {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {log.name} ---\n{log.read_text()[-6000:]}" for _, log in self.processes if log.exists())

    def stop_all(self) -> None:
        for process, _ in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@pytest.fixture
def workers(tmp_path, workspace_root, redis_queue):
    require_backend("bubblewrap")
    pool = Workers(tmp_path, workspace_root)
    yield pool
    pool.stop_all()
    # Horses of killed workers run in their own process groups: end any still holding an attempt
    # before the test database is flushed.
    for claimed_by in Attempt.objects.filter(status=Attempt.RUNNING).values_list("claimed_by", flat=True):
        pid = claimed_pid(claimed_by) if ":" in claimed_by else 0
        if pid and pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def throwaway_redis(tmp_path, settings):
    """A redis-server of this test alone (tests.evaluation.throwaway), which the evaluation queue of
    this process uses; its URL is for the workers' REDIS_URL."""
    from tests.evaluation.throwaway import ThrowawayRedis

    server = ThrowawayRedis(tmp_path)
    server.start()
    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": server.url, "DEFAULT_TIMEOUT": 3600}}
    yield server
    server.stop()


@pytest.fixture
def throwaway_postgres():
    """A Postgres cluster of this test alone (tests.evaluation.throwaway), started."""
    from tests.evaluation.throwaway import ThrowawayPostgres

    server = ThrowawayPostgres()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()


# --- a tiny suite: one paper, three functions, one quick experiment each ---------------------------

TINY_STATS = '''"""Small statistics helpers."""


def weighted_mean(values, weights):
    """The mean of `values`, each counted `weights` times."""
    total = 0.0
    for value, weight in zip(values, weights):
        total += value * weight
    return total / sum(weights)


def spread(values):
    """The largest value minus the smallest."""
    return max(values) - min(values)


def geometric_mean(values):
    """The n-th root of the product of the n values."""
    product = 1.0
    for value in values:
        product *= value
    return product ** (1.0 / len(values))
'''
TINY_RUN = '''import json
import sys

from stats import geometric_mean, spread, weighted_mean

values = [1.0, 2.0, 4.0, 8.0]
weights = [4.0, 3.0, 2.0, 1.0]
which = sys.argv[1]
print(f"computing {which}")
if which == "mean":
    print(json.dumps({"mean": weighted_mean(values, weights)}))
elif which == "spread":
    print(json.dumps({"spread": spread(values)}))
else:
    print(json.dumps({"geometric_mean": geometric_mean(values)}))
'''
TINY_PAPER = {
    "id": "tiny-paper",
    "title": "Three Small Statistics",
    "functions": [
        {"id": 0, "file": "stats.py", "name": "weighted_mean", "description": "The weighted mean.", "relevant_paper": "", "line": 4},
        {"id": 1, "file": "stats.py", "name": "spread", "description": "The range.", "relevant_paper": "", "line": 12},
        {"id": 2, "file": "stats.py", "name": "geometric_mean", "description": "The geometric mean.", "relevant_paper": "", "line": 17},
    ],
    "experiments": [
        {"id": 0, "description": "The weighted mean.", "command": "python3 run.py mean", "answer_format": {"mean": 0.0},
         "depends_on": [0], "rtol": None, "atol": None, "timeout": 60},
        {"id": 1, "description": "The spread.", "command": "python3 run.py spread", "answer_format": {"spread": 0.0},
         "depends_on": [1], "rtol": None, "atol": None, "timeout": 60},
        {"id": 2, "description": "The geometric mean.", "command": "python3 run.py geo",
         "answer_format": {"geometric_mean": 0.0}, "depends_on": [2], "rtol": None, "atol": None, "timeout": 60},
    ],
}


def suite_imported(root: Path, *, name: str, paper: dict, files: dict[str, str], samples: str = "1", **declared):
    """A one-paper suite in our format written under `root` (code `files`, `paper` as paper.json),
    its gold computed by running the gold code, imported with its samples at each n of `samples`."""
    paper_dir = root / paper["id"]
    code_dir = paper_dir / "code"
    code_dir.mkdir(parents=True)
    for path, text in files.items():
        (code_dir / path).write_text(text)
    (root / "suite.json").write_text(json.dumps(
        {"name": name, "version": "1.0", "description": paper["title"], "papers": [paper["id"]], **declared}
    ))
    (paper_dir / "paper.json").write_text(json.dumps(paper))
    (paper_dir / "paper.md").write_text(f"# {paper['title']}\n\n{paper['title']}.\n")
    results = {}
    for experiment in paper["experiments"]:
        printed = subprocess.run(
            experiment["command"].split(), cwd=code_dir, capture_output=True, text=True, check=True
        ).stdout
        results[str(experiment["id"])] = json.loads(printed.strip().splitlines()[-1])
    (paper_dir / "gold.json").write_text(json.dumps({"results": results, "spread": {}}))
    with open(os.devnull, "w") as quiet:
        call_command("import_suite", str(root), "--samples", samples, stdout=quiet)
    from runs.models import Suite

    return Suite.objects.get(name=name)


@pytest.fixture
def tiny_suite(tmp_path, db):
    """Suite "tiny": three n=1 samples whose experiments take a few hundredths of a second, for
    tests about the machinery rather than the benchmark. Gold comes from running the gold code."""
    require_backend("bubblewrap")
    return suite_imported(tmp_path / "tiny-suite", name="tiny", paper=TINY_PAPER,
                          files={"stats.py": TINY_STATS, "run.py": TINY_RUN})


# --- a pair whose functions are each right alone and wrong together -------------------------------

PAIR_SCALE = '''"""Two scale factors applied one after the other."""


def scale_a(x):
    """Doubles x."""
    return x * 2.0


def scale_b(x):
    """Triples x."""
    return x * 3.0
'''
PAIR_RUN = '''import json

from scale import scale_a, scale_b

print(json.dumps({"value": scale_b(scale_a(10.0))}))
'''
PAIR_PAPER = {
    "id": "pair-paper",
    "title": "Two Scale Factors",
    "functions": [
        {"id": 0, "file": "scale.py", "name": "scale_a", "description": "Doubles x.", "relevant_paper": "", "line": 4},
        {"id": 1, "file": "scale.py", "name": "scale_b", "description": "Triples x.", "relevant_paper": "", "line": 9},
    ],
    "experiments": [
        {"id": 0, "description": "Ten, doubled then tripled.", "command": "python3 run.py", "answer_format": {"value": 0.0},
         "depends_on": [0, 1], "rtol": 0.05, "atol": 0.0, "timeout": 60},
    ],
}
# Each 4% high: within the 5% tolerance alone, 8.16% high together.
PAIR_EACH_FOUR_PERCENT_HIGH = {"scale_a": "return x * 2.0 * 1.04", "scale_b": "return x * 3.0 * 1.04"}


@pytest.fixture
def pair_suite(tmp_path, db):
    """Suite "pair" (gold not public): one n=2 sample masking two scale functions that one
    experiment applies one after the other with a 5% tolerance."""
    require_backend("bubblewrap")
    return suite_imported(tmp_path / "pair-suite", name="pair", paper=PAIR_PAPER,
                          files={"scale.py": PAIR_SCALE, "run.py": PAIR_RUN}, samples="2")
