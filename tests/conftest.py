"""Shared fixtures: a clean environment for every test, the built-in suite, a small suite in our
format, and fake gold code for the upstream fixture's papers."""
import copy
import csv
import importlib
import json
import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from runs.agents.llm import pricing
from tests.support import TINY_REQUIREMENT, import_builtin_suite, redis_test_client, redis_test_url, require

pytest_plugins = ["tests.fakes.fixtures"]



def _own_deployment_per_xdist_worker() -> None:
    """Under pytest-xdist (`pytest -n N`, as `make test` runs), each worker process (gw0, gw1, ...)
    has a test database of its own (pytest-django names it), and gets here a Redis database and a
    deployment of its own too: TEST_REDIS_DB minus its number, and DEPLOYMENT_ID with its name
    added. Otherwise one worker's flushes, queue reads and leftover sweeps would take the other's
    jobs, keys and sandboxes (both databases number their attempts from 1).

    Django read its settings before any conftest is imported: they are read again with the
    worker's DEPLOYMENT_ID, and those named after it (the queues) replace what was read; the
    others are left as they are (Django has added its defaults to some: DATABASES)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    redis_db = int(os.environ.get("TEST_REDIS_DB", "15")) - int(worker.removeprefix("gw"))
    if redis_db < 1:
        raise RuntimeError(
            f"xdist worker {worker} would use Redis database {redis_db} (TEST_REDIS_DB minus the worker's number): "
            "raise TEST_REDIS_DB or run fewer workers (database 0 is the site's, REDIS_URL's default)"
        )
    os.environ["TEST_REDIS_DB"] = str(redis_db)
    deployment = os.environ["DEPLOYMENT_ID"] = f"{django_settings.DEPLOYMENT_ID}-{worker}"
    again = importlib.reload(importlib.import_module(os.environ["DJANGO_SETTINGS_MODULE"]))
    for name in filter(str.isupper, dir(again)):
        if deployment in repr(getattr(again, name)):
            setattr(django_settings, name, getattr(again, name))


_own_deployment_per_xdist_worker()
# The workers, servers and scripts the tests start serve this test run's deployment: they connect to
# the test database, whose name would give them another default DEPLOYMENT_ID (other queues, other
# job ids) than the one this process derived before pytest-django renamed the database.
os.environ.setdefault("DEPLOYMENT_ID", django_settings.DEPLOYMENT_ID)


@pytest.fixture(autouse=True)
def isolated_cache(settings):
    """The Redis cache (where rate limits count) on the tests' Redis database under a key prefix of
    this test alone: every test starts with no counts, and concurrent test runs never share one.

    Page views are not limited: a test (a browser's above all) asks for pages far faster than a
    person reads them. The tests of those limits (tests/abuse/test_page_limits.py) set their own."""
    import uuid

    from autoexperiment_site.abuse import PAGE_RATES

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_test_url(),
            "KEY_PREFIX": f"test-{uuid.uuid4().hex}",
        }
    }
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, **dict.fromkeys(PAGE_RATES)}  # None: off


@pytest.fixture(autouse=True)
def clean_llm_environment(monkeypatch):
    """No key, endpoint or price file leaks in from the developer's shell."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "LLM_PRICES_FILE"):
        monkeypatch.delenv(name, raising=False)
    pricing.reload_prices()
    yield
    pricing.reload_prices()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Users' passwords hashed with a fast hasher: the real one takes a noticeable time per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def workspace_root(tmp_path, settings) -> Path:
    """Workspaces and trajectories of this test only, in bubblewrap sandboxes."""
    root = tmp_path / "workspaces"
    root.mkdir()
    settings.WORKSPACE_ROOT = root
    settings.SANDBOX_BACKEND = "bubblewrap"
    return root


@pytest.fixture(scope="session")
def built_environment():
    """(root, path) of one tiny environment (TINY_REQUIREMENT) built once for the whole session,
    under a root the sandbox uid can reach (a 0700 pytest-of-root is not)."""
    import shutil
    import tempfile

    from sandbox.environments import Declaration, environment_build

    root = Path(tempfile.mkdtemp(prefix="autoexperiment-environments-"))
    os.chmod(root, 0o755)
    path, _ = environment_build(root, Declaration(requirements=(TINY_REQUIREMENT,)))
    yield root, path
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def data_cache(settings) -> Path:
    """This test's own DATA_CACHE_ROOT, which the sandbox uid can reach."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="autoexperiment-data-"))
    os.chmod(root, 0o755)
    settings.DATA_CACHE_ROOT = root
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def claims_in_the_test_transaction(settings):
    """Work claimed inside a (non-transactional) test's transaction: the heartbeat thread's own
    database connection cannot see the test's uncommitted rows, so a beat during a long piece of
    work (a re-execution that also runs hidden variants, on a loaded machine) would take the claim
    for lost. No beat comes while the work runs."""
    settings.ATTEMPT_HEARTBEAT_SECONDS = 600


@pytest.fixture
def builtin(db):
    """The built-in suite (4 papers, 28 functions) with its n=1 samples."""
    return import_builtin_suite()


@pytest.fixture
def redis_queue(settings):
    """The evaluation queue on the tests' Redis database (tests.support.redis_test_url), flushed
    before and after."""
    client = redis_test_client()
    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": redis_test_url(), "DEFAULT_TIMEOUT": 3600}}
    client.flushdb()
    from runs.evaluation.queue import evaluation_queue

    yield evaluation_queue()
    client.flushdb()
    client.close()


# CI checks the repository out with ../shared beside it (see .ci/run).
UPSTREAM_FIXTURE = Path(
    os.environ.get(
        "AUTOEXPERIMENT_UPSTREAM_FIXTURE",
        Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "upstream-autoexperiment",
    )
)

# --- our suite format ----------------------------------------------------------------------------

NATIVE_CODE = {
    "model.py": (
        '"""A toy model with two same-named methods."""\n'
        "\n"
        "\n"
        "class Loss:\n"
        "    def __call__(self, x):\n"  # line 5
        "        return x * 2\n"
        "\n"
        "\n"
        "class Other:\n"
        "    def __call__(self, x):\n"  # line 10
        "        return x + 1\n"
        "\n"
        "\n"
        "def train(steps):\n"  # line 14
        "    return steps\n"
    ),
    "utils/metrics.py": "def mean(values):\n    return sum(values) / len(values)\n",
    "run.py": "print('{\"loss\": 1.0}')\n",
}

NATIVE_PAPER = {
    "id": "toy-paper",
    "title": "A Toy Paper",
    "functions": [
        {"id": 0, "file": "model.py", "name": "Loss.__call__", "description": "Doubles x.",
         "relevant_paper": "We double.", "line": 5},
        {"id": 1, "file": "model.py", "name": "Other.__call__", "description": "Adds one.", "line": 10},
        # Stale hint: the def is at line 14.
        {"id": 2, "file": "model.py", "name": "train", "description": "Trains.", "relevant_paper": "", "line": 3},
        {"id": 3, "file": "utils/metrics.py", "name": "mean", "description": "The mean.", "line": None},
    ],
    "experiments": [
        {"id": 0, "description": "Train and report the loss.", "command": "python run.py",
         "answer_format": {"loss": 0.0, "curve": [0.0, 0.0]}, "depends_on": [0, 2], "rtol": None, "atol": None,
         "timeout": 60},
        {"id": 1, "description": "Report the mean.", "command": "python run.py --mean",
         "answer_format": {"mean": 0.0}, "depends_on": [1, 3], "rtol": 0.1, "atol": 1e-6, "timeout": 30},
    ],
}

NATIVE_GOLD = {
    "generated_by": "python manage.py make_gold",
    "python": "3.11.2",
    "numpy": "1.26.4",
    "results": {"0": {"loss": 0.25, "curve": [1.0, 0.5]}},
    "spread": {"0": 0.001},
}


def write_native_suite(root: Path, *, suite: dict | None = None, paper: dict | None = None,
                       gold: dict | None = NATIVE_GOLD, code: dict | None = None,
                       paper_md: str | None = None) -> Path:
    """Write a one-paper suite in our format under `root` and return `root`.

    Arguments replace the defaults above (pass `gold=None` for no gold.json); tests break one thing
    at a time on top of a suite known to be valid.
    """
    paper = copy.deepcopy(NATIVE_PAPER if paper is None else paper)
    suite = {"name": "toy", "version": "1.0", "description": "A toy suite.", "papers": ["toy-paper"]} if suite is None else suite
    paper_dir = root / "toy-paper"
    for relative, text in (NATIVE_CODE if code is None else code).items():
        (paper_dir / "code" / relative).parent.mkdir(parents=True, exist_ok=True)
        (paper_dir / "code" / relative).write_text(text)
    (root / "suite.json").write_text(json.dumps(suite, indent=2))
    (paper_dir / "paper.json").write_text(json.dumps(paper, indent=2))
    title = paper.get("title", "A Toy Paper") if isinstance(paper, dict) else "A Toy Paper"
    (paper_dir / "paper.md").write_text(paper_md if paper_md is not None else f"# {title}\n\nWe double x.\n")
    if gold is not None:
        (paper_dir / "gold.json").write_text(json.dumps(gold, indent=2))
    return root


@pytest.fixture
def native_suite(tmp_path) -> Path:
    """A valid suite "toy" with one paper, four functions (one stale hint) and two experiments (one gold)."""
    return write_native_suite(tmp_path / "toy")


@pytest.fixture
def native_suite_writer():
    """`write_native_suite`, for tests that write a modified suite (test modules cannot import conftest)."""
    return write_native_suite


@pytest.fixture
def native_paper() -> dict:
    """A fresh copy of the default paper.json, to modify."""
    return copy.deepcopy(NATIVE_PAPER)


@pytest.fixture
def native_gold() -> dict:
    """A fresh copy of the default gold.json, to modify."""
    return copy.deepcopy(NATIVE_GOLD)


# --- fake gold code for the upstream fixture -----------------------------------------------------

# Functions placed away from their `header_line` hint, to exercise stale hints: (paper, func_id) -> shift.
# 2303.11932 func 3 is one of four `__call__` in losses.py: its hint (105) then matches none of them
# and the def inside the row's line_start..line_end span (107) must still be chosen.
STALE_SHIFTS = {("2205.00048", 3): 2, ("2303.11932", 3): 2}


def upstream_functions(paper_ids) -> list[dict]:
    """The fixture's mlrc_funcs.csv rows for `paper_ids`."""
    with open(UPSTREAM_FIXTURE / "mlrc_funcs.csv", newline="", encoding="utf-8") as handle:
        return [row for row in csv.DictReader(handle) if row["paper_id"] in paper_ids]


def write_upstream_code(root: Path, *, paper_ids=("2205.00048", "2303.11932")) -> Path:
    """Generate `<root>/<paper_id>/<file>` with every function the fixture names, and return `root`.

    Each def sits on its `header_line` (shifted for STALE_SHIFTS). Names defined more than once in
    a file (the four `__call__` in losses.py) and dunder methods live in a class `F<func_id>`, so
    only the line hint tells them apart; the others are module-level functions.
    """
    require(UPSTREAM_FIXTURE.is_dir(), f"the upstream fixture is expected at {UPSTREAM_FIXTURE} (../shared beside the checkout)")
    by_file: dict[tuple[str, str], list[dict]] = {}
    for row in upstream_functions(paper_ids):
        by_file.setdefault((row["paper_id"], row["file"]), []).append(row)
    for (paper_id, relative), rows in by_file.items():
        names = [row["name"] for row in rows]
        lines: list[str] = []
        for row in sorted(rows, key=_def_line):
            target = _def_line(row) + STALE_SHIFTS.get((paper_id, int(row["func_id"])), 0)
            in_class = names.count(row["name"]) > 1 or row["name"].startswith("__")
            while len(lines) < target - (2 if in_class else 1):
                lines.append("# filler")
            if in_class:
                lines += [f"class F{row['func_id']}:", f"    def {row['name']}(self, *args):", "        return None"]
            else:
                lines += [f"def {row['name']}(*args):", "    return None"]
        path = root / paper_id / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return root


def _def_line(row: dict) -> int:
    # 2203.01928's only function has no header_line; its body starts at line_start.
    return int(row["header_line"] or int(row["line_start"]) - 1)


@pytest.fixture
def upstream_metadata() -> Path:
    """The upstream fixture directory (read-only)."""
    require(UPSTREAM_FIXTURE.is_dir(), f"the upstream fixture is expected at {UPSTREAM_FIXTURE} (../shared beside the checkout)")
    return UPSTREAM_FIXTURE


@pytest.fixture
def upstream_code(tmp_path, upstream_metadata) -> Path:
    """Fake gold code for papers 2205.00048 and 2303.11932; the fixture's other papers have none."""
    return write_upstream_code(tmp_path / "code")


@pytest.fixture
def upstream_code_writer(upstream_metadata):
    """`write_upstream_code`, for tests that need code for other papers."""
    return write_upstream_code


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With TEST_TIMELINE set to a file, each test's worker, start and end are appended to it as a
    JSON line: scripts/test_timeline.py reads them to show which worker the run waited on, and for what."""
    path = os.environ.get("TEST_TIMELINE")
    if not path:
        yield
        return
    import time

    started = time.time()
    yield
    line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "test": item.nodeid, "start": started, "end": time.time()}
    with open(path, "a") as timeline:
        timeline.write(json.dumps(line) + "\n")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The tests marked slow first, each group keeping its order (pytest-django's, by database use).
    `make test` hands tests to its workers one at a time as they become free, in this order: started
    last, a test of minutes kept one worker busy while the others had nothing left to do; started
    first, the short tests fill the others' time around it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
